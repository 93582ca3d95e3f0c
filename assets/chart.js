// A chart of the guide (guide/charts.py): one plotly figure that stays on the page from one run
// to the next. Streamlit's own st.plotly_chart makes a new element whenever the figure's data
// changes (its element id is hashed from the figure), so every case change used to draw every
// chart from scratch (Plotly.newPlot). Here the element keeps its key: a new figure is applied
// to the same plot with Plotly.react, and only when the chart is on screen (or close to it);
// a chart below the fold is drawn when the reader scrolls to it.
//
// plotly.js is the copy that ships with the installed plotly package, served by the guide
// itself (guide/http.py) and loaded once per page.
const MARGIN = "300px";  // start drawing a chart this far before it scrolls into view
const CONFIG = { displayModeBar: false, responsive: true };

function plotly(source) {
  if (window.Plotly) return Promise.resolve(window.Plotly);
  if (!window.__guidePlotly) {
    window.__guidePlotly = new Promise((resolve, reject) => {
      const script = document.createElement("script");
      script.src = source;
      script.async = true;
      script.onload = () => resolve(window.Plotly);
      script.onerror = () => {
        window.__guidePlotly = null;  // a later run may try again
        reject(new Error(`plotly.js did not load from ${source}`));
      };
      document.head.appendChild(script);
    });
  }
  return window.__guidePlotly;
}

// The page's theme (Streamlit sets it as CSS variables around the component), so a chart
// reads like the rest of the page in light and dark mode.
function themed(layout, host) {
  const css = getComputedStyle(host);
  const value = (name, fallback) => css.getPropertyValue(name).trim() || fallback;
  const text = value("--st-text-color", "#31333f");
  const grid = value("--st-border-color-light", "#e6eaf1");
  const colors = value("--st-chart-categorical-colors", "").split(",").map(c => c.trim()).filter(Boolean);
  const axis = { automargin: true, gridcolor: grid, zerolinecolor: grid, linecolor: grid, tickfont: { color: text },
                 title: { font: { color: text } } };
  const merged = {
    ...layout,
    font: { family: value("--st-font", "sans-serif"), color: text, size: 14, ...(layout.font || {}) },
    paper_bgcolor: "rgba(0,0,0,0)",
    plot_bgcolor: "rgba(0,0,0,0)",
    autosize: true,
  };
  if (colors.length) merged.colorway = colors;
  for (const name of Object.keys(layout).filter(k => /^[xy]axis\d*$/.test(k)).concat(["xaxis", "yaxis"])) {
    const own = layout[name] || {};
    merged[name] = { ...axis, ...own, title: { ...axis.title, ...(own.title || {}) } };
  }
  delete merged.template;  // the page's look, never plotly.py's default template (guide/charts.py does not send it)
  return merged;
}

function draw(host) {
  const pending = host.__guidePending;
  if (!pending || !host.__guideVisible) return;
  host.__guidePending = null;
  plotly(pending.source)
    .then(Plotly => Plotly.react(host, pending.figure.data || [], themed(pending.figure.layout || {}, host), CONFIG))
    .catch(() => { host.textContent = pending.unavailable || ""; });  // in the reader's language
}

const watcher = new IntersectionObserver(entries => {
  for (const entry of entries) {
    entry.target.__guideVisible = entry.isIntersecting;
    draw(entry.target);
  }
}, { rootMargin: `${MARGIN} 0px ${MARGIN} 0px` });

// A printed page shows every chart, drawn or not yet.
if (!window.__guideChartsPrint) {
  window.__guideChartsPrint = true;
  window.addEventListener("beforeprint", () => {
    for (const host of document.querySelectorAll(".guide-chart")) {
      host.__guideVisible = true;
      draw(host);
    }
  });
}

export default function (component) {
  const { data, parentElement } = component;
  const host = parentElement.querySelector(".guide-chart");
  if (!host || !data || typeof data.figure !== "string") return () => {};
  const theme = getComputedStyle(host).getPropertyValue("--st-text-color");
  if (host.__guideFigure !== data.figure || host.__guideTheme !== theme) {  // a new figure, or light / dark
    host.__guideFigure = data.figure;
    host.__guideTheme = theme;
    host.__guidePending = { figure: JSON.parse(data.figure), source: data.source, unavailable: data.unavailable };
    if (!host.__guideWatched) {
      host.__guideWatched = true;
      watcher.observe(host);  // its first report says whether the chart is on screen
    } else {
      draw(host);
    }
  }
  return () => { watcher.unobserve(host); host.__guideWatched = false; };
}

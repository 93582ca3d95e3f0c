// Put into Streamlit's page by guide/http.py, before Streamlit's own scripts: where the server is.
// Streamlit's front end finds its server by asking the page's own path first
// (/oom/_stcore/health, which answers 404 on a chapter), then its parent, after a pause: about
// 130 ms lost on every chapter's first load. The middleware knows how deep the page sits below
// the server's root (data-guide-depth: 0 for the home page, 1 for a chapter) and this says it,
// behind a proxy that adds its own prefix too.
(function () {
  const given = window.__streamlit || {};
  if (given.BACKEND_BASE_URL) return;  // an embedding page already said where the server is
  const depth = Number(document.currentScript && document.currentScript.dataset.guideDepth);
  const here = new URL(window.location.href);
  let path = here.pathname;
  if (depth === 1) {
    path = path.replace(/[^/]*\/?$/, "");  // "/guide/oom" -> "/guide/"
  } else if (!path.endsWith("/")) {
    path += "/";
  }
  window.__streamlit = Object.assign({}, given, { BACKEND_BASE_URL: here.origin + path });
})();

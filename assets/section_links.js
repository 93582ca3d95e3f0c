// "Link to this section" (guide/section_links.py): a button under each heading of the chapter
// that opens the address of that section, ready to copy. Python sends, once per run, what every
// such link starts with (the language and the chapter's case, defaults written out) and the
// headings' ids; the rest is read from the address bar when the reader opens a link (every
// calculator value they set), so a case change costs the page no element and no DOM change.
let current = null;  // the latest data: pinned query, names it pins, anchors, texts

function sectionAddress(anchor) {
  const here = new URL(window.location.href);
  const query = new URLSearchParams(current.pinned);
  const pinned = new Set(current.pinnedNames);
  for (const [name, value] of here.searchParams) {
    if (!pinned.has(name)) query.append(name, value);
  }
  return `${here.origin}${here.pathname}?${query.toString()}#${encodeURIComponent(anchor)}`;
}

function icon(name) {
  const span = document.createElement("span");
  span.className = "guide-icon";
  span.setAttribute("aria-hidden", "true");
  span.setAttribute("translate", "no");
  span.textContent = name;
  return span;
}

function showCopied(button) {
  button.__guideCopied = true;
  button.lastChild.textContent = current.copied;
  button.firstChild.textContent = "check";
  clearTimeout(button.__guideTimer);
  button.__guideTimer = setTimeout(() => {
    button.__guideCopied = false;
    button.lastChild.textContent = current.copy;
    button.firstChild.textContent = "content_copy";
  }, 2000);
}

function copy(button, address) {
  const select = () => {  // no clipboard (a page served over plain HTTP): the address selected instead
    const range = document.createRange();
    range.selectNodeContents(address);
    const selection = window.getSelection();
    selection.removeAllRanges();
    selection.addRange(range);
  };
  if (!navigator.clipboard) { select(); return; }
  navigator.clipboard.writeText(address.textContent).then(() => showCopied(button), select);
}

// Write a text only when it differs: every write is a change of the page (it would call
// attach() again, and the page would change on every case change for nothing).
function setText(node, text) {
  if (node.textContent !== text) node.textContent = text;
}

// The texts of a link in the page's language, and its address if it is open.
function fill(link) {
  setText(link.querySelector(".guide-section-link-toggle").lastChild, current.label);
  setText(link.querySelector(".guide-section-link-help"), current.help);
  const copyButton = link.querySelector(".guide-section-link-copy");
  setText(copyButton.lastChild, copyButton.__guideCopied ? current.copied : current.copy);
  if (!link.querySelector(".guide-section-link-box").hidden) {
    setText(link.querySelector(".guide-section-link-address"), sectionAddress(link.dataset.anchor));
  }
}

function build(anchor) {
  const link = document.createElement("div");
  link.className = "guide-section-link";
  link.dataset.anchor = anchor;
  const toggle = document.createElement("button");
  toggle.type = "button";
  toggle.className = "guide-section-link-toggle";
  toggle.setAttribute("aria-expanded", "false");
  toggle.append(icon("link"), document.createElement("span"));
  const box = document.createElement("div");
  box.className = "guide-section-link-box";
  box.id = `guide-section-link-${anchor}`;
  box.hidden = true;
  toggle.setAttribute("aria-controls", box.id);
  const help = document.createElement("p");
  help.className = "guide-section-link-help";
  const row = document.createElement("div");
  row.className = "guide-section-link-row";
  const address = document.createElement("code");
  address.className = "guide-section-link-address";
  const copyButton = document.createElement("button");
  copyButton.type = "button";
  copyButton.className = "guide-section-link-copy";
  copyButton.append(icon("content_copy"), document.createElement("span"));
  row.append(address, copyButton);
  box.append(help, row);
  link.append(toggle, box);
  toggle.addEventListener("click", () => {
    box.hidden = !box.hidden;
    toggle.setAttribute("aria-expanded", String(!box.hidden));
    if (!box.hidden) {
      address.textContent = sectionAddress(anchor);  // the address bar as it is now
      copyButton.focus();
    }
  });
  copyButton.addEventListener("click", () => copy(copyButton, address));
  box.addEventListener("keydown", event => {
    if (event.key === "Escape") {
      box.hidden = true;
      toggle.setAttribute("aria-expanded", "false");
      toggle.focus();
    }
  });
  return link;
}

// Give every heading of the page its link (Streamlit draws headings as they arrive, and may draw
// one again): cheap enough to run once per frame while the page changes.
function attach() {
  if (!current) return;
  for (const anchor of current.anchors) {
    const heading = document.getElementById(anchor);
    const holder = heading && heading.closest("[data-testid='stHeading']");
    if (!holder) continue;
    let link = holder.querySelector(":scope > .guide-section-link");
    if (!link || link.dataset.anchor !== anchor) {
      if (link) link.remove();
      link = build(anchor);
      holder.appendChild(link);
    }
    fill(link);
  }
}

let pending = false;
function attachSoon() {
  if (pending) return;
  pending = true;
  window.requestAnimationFrame(() => { pending = false; attach(); });
}

let watching = false;
export default function (component) {
  const { data } = component;
  if (!data || typeof data.pinned !== "string" || !Array.isArray(data.anchors)) return () => {};
  current = data;
  attach();
  if (!watching) {
    watching = true;
    new MutationObserver(attachSoon).observe(document.body, { childList: true, subtree: true });
  }
  return () => {};
}

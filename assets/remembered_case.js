// The reader's case remembered in their own browser (guide/remembered.py): the model and GPU
// they chose last, under one key for the whole guide (every chapter and the home page), never
// sent anywhere but back to their own page. Python asks to save or to forget through `data`,
// and says what it believes the browser holds (`known`); this reports what the browser holds
// as the state value `stored` (a JSON string, "" if none) only when Python does not know it
// yet: each report costs a rerun of the page, so a tab with nothing stored costs none.
const KEY = "guide.case";

// What a case may be (guide/remembered.py checks it again): anyone can write into localStorage,
// so anything else (too long, nested, not two short strings) is removed and reported as dropped.
const MAX_CHARS = 2048;
const NAMES = ["model", "gpu"];

function dropped() {
  window.localStorage.removeItem(KEY);
  return JSON.stringify({ dropped: true });
}

function read() {
  try {
    const raw = window.localStorage.getItem(KEY);
    if (!raw) {
      return "";
    }
    if (raw.length > MAX_CHARS) {
      return dropped();
    }
    const value = JSON.parse(raw);
    if (!value || typeof value !== "object" || Array.isArray(value)
        || NAMES.some((name) => name in value && typeof value[name] !== "string")) {
      return dropped();
    }
    return JSON.stringify(value);
  } catch (error) {  // storage switched off, or not JSON at all
    try {
      return window.localStorage.getItem(KEY) ? dropped() : "";
    } catch (inner) {
      return "";
    }
  }
}

function canonical(text) {
  try {
    return text ? JSON.stringify(JSON.parse(text)) : "";
  } catch (error) {
    return "";
  }
}

export default function (component) {
  const { data, setStateValue } = component;
  try {
    if (data && data.forget) {
      window.localStorage.removeItem(KEY);
    } else if (data && data.save) {
      window.localStorage.setItem(KEY, JSON.stringify(data.save));
    }
  } catch (error) { /* storage full or switched off: the page works without it */ }
  const held = read();
  if (held !== canonical(data && data.known)) {
    setStateValue("stored", held);
  }
  return () => {};
}

// The reader's case remembered in their own browser (guide/remembered.py): the model and GPU
// they chose last, under one key for the whole guide (every chapter and the home page), never
// sent anywhere but back to their own page. Python asks to save or to forget through `data`,
// and says what it believes the browser holds (`known`); this reports what the browser holds
// as the state value `stored` (a JSON string, "" if none) only when Python does not know it
// yet: each report costs a rerun of the page, so a tab with nothing stored costs none.
const KEY = "guide.case";

function read() {
  try {
    const raw = window.localStorage.getItem(KEY);
    const value = raw ? JSON.parse(raw) : null;
    return value && typeof value === "object" && !Array.isArray(value) ? JSON.stringify(value) : "";
  } catch (error) {  // storage switched off, or a value that is not ours: nothing remembered
    return "";
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

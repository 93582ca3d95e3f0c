// The reader's case remembered in their own browser (guide/remembered.py): the model and GPU
// they chose last, under one key for the whole guide (every chapter and the home page), never
// sent anywhere but back to their own page. Python asks to save or to forget through `data`;
// this reports what the browser holds as the state value `stored` (a JSON string, "" if none).
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

export default function (component) {
  const { data, setStateValue } = component;
  try {
    if (data && data.forget) {
      window.localStorage.removeItem(KEY);
    } else if (data && data.save) {
      window.localStorage.setItem(KEY, JSON.stringify(data.save));
    }
  } catch (error) { /* storage full or switched off: the page works without it */ }
  setStateValue("stored", read());
  setStateValue("ready", true);
  return () => {};
}

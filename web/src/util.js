// Small DOM and formatting helpers.

export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === 'class') el.className = v;
    else if (k === 'text') el.textContent = v;
    else if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
    else if (k === 'style' && typeof v === 'object') Object.assign(el.style, v);
    else el.setAttribute(k, v === true ? '' : v);
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

export const DASH = '\u2014';

export function fmtBytes(n) {
  if (n === null || n === undefined || Number.isNaN(n)) return DASH;
  const u = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let i = 0;
  let x = Number(n);
  while (Math.abs(x) >= 1024 && i < u.length - 1) {
    x /= 1024;
    i++;
  }
  return `${x.toFixed(i === 0 ? 0 : 1)} ${u[i]}`;
}

export function fmtSeconds(s) {
  if (s === null || s === undefined || Number.isNaN(s)) return DASH;
  if (s === 0) return '0 s';
  if (s < 1e-3) return `${(s * 1e6).toFixed(1)} \u00b5s`;
  if (s < 1) return `${(s * 1e3).toFixed(2)} ms`;
  return `${s.toFixed(3)} s`;
}

export function fmtNum(n) {
  if (n === null || n === undefined) return DASH;
  const a = Math.abs(n);
  if (a >= 1e12) return `${(n / 1e12).toFixed(2)} T`;
  if (a >= 1e9) return `${(n / 1e9).toFixed(2)} G`;
  if (a >= 1e6) return `${(n / 1e6).toFixed(2)} M`;
  if (a >= 1e3) return `${(n / 1e3).toFixed(1)} k`;
  return String(n);
}

export function fmtTime(unix) {
  if (!unix) return DASH;
  return new Date(unix * 1000).toISOString().replace('T', ' ').slice(0, 19);
}

// Shows an error (an ApiError's message and the API's own error document).
export function errorBox(err) {
  const box = h('div', { class: 'error', role: 'alert' }, h('strong', {}, err.message || String(err)));
  if (err.text) box.append(h('pre', { class: 'raw' }, err.text));
  return box;
}

export function debounce(fn, ms) {
  let t = 0;
  return (...a) => {
    clearTimeout(t);
    t = setTimeout(() => fn(...a), ms);
  };
}

// el.replaceChildren without the null/false placeholders of conditional parts.
export function fill(el, ...children) {
  el.replaceChildren(...children.flat().filter((c) => c !== null && c !== undefined && c !== false));
}

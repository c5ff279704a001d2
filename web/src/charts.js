// Bar, line and scatter charts with Chart.js (only the pieces we use are registered).
import { BarController, BarElement, CategoryScale, Chart, Filler, Legend, LineController, LineElement, LinearScale, LogarithmicScale, PointElement, ScatterController, Title, Tooltip } from 'chart.js';
import { h } from './util.js';

Chart.register(BarController, BarElement, CategoryScale, Filler, LineController, LineElement, LinearScale, LogarithmicScale, PointElement, ScatterController, Legend, Title, Tooltip);

export const PALETTE = ['#3b6fd8', '#e07b39', '#3aa676', '#b04fc2', '#d9a400', '#d24f5f', '#4fb0c2', '#7a7a7a'];

// A canvas in a fixed-size box with a Chart.js chart of type on it; the
// options every chart here shares (fixed height, no animation, a title, a
// legend for several datasets, tooltip text from tip(context)).
function makeChart({ type, title, data, height, tip, options }) {
  const canvas = h('canvas', { role: 'img', 'aria-label': title });
  const el = h('div', { class: 'chart', style: { height: `${height}px` } }, canvas);
  const chart = new Chart(canvas, {
    type,
    data,
    options: {
      responsive: true,
      maintainAspectRatio: false,
      animation: false,
      ...options,
      plugins: {
        title: { display: !!title, text: title },
        legend: { display: data.datasets.length > 1 },
        tooltip: { callbacks: { label: (c) => `${c.dataset.label || ''}: ${tip(c)}` } },
      },
    },
  });
  return { el, chart };
}

// Returns {el, chart}. format(value) labels the axis.
export function barChart({ title, labels, datasets, format, stacked = false, horizontal = false, height = 240 }) {
  return makeChart({
    type: 'bar',
    title,
    height,
    data: {
      labels,
      datasets: datasets.map((d, i) => ({ backgroundColor: PALETTE[i % PALETTE.length], ...d })),
    },
    tip: (c) => (format ? format(c.raw) : c.raw),
    options: {
      indexAxis: horizontal ? 'y' : 'x',
      scales: {
        [horizontal ? 'x' : 'y']: { stacked, beginAtZero: true, ticks: { callback: (v) => (format ? format(v) : v) } },
        [horizontal ? 'y' : 'x']: { stacked },
      },
    },
  });
}

// Lines over shared labels (e.g. per-iteration times); a dataset with
// flat: true is drawn dashed without points (a reference level).
export function lineChart({ title, labels, datasets, format, height = 240 }) {
  return makeChart({
    type: 'line',
    title,
    height,
    data: {
      labels,
      datasets: datasets.map(({ flat, ...d }, i) => ({
        borderColor: PALETTE[i % PALETTE.length],
        backgroundColor: PALETTE[i % PALETTE.length],
        pointRadius: flat ? 0 : 3,
        borderDash: flat ? [6, 4] : undefined,
        borderWidth: flat ? 1.5 : 2,
        ...d,
      })),
    },
    tip: (c) => (format ? format(c.raw) : c.raw),
    options: { scales: { y: { beginAtZero: true, ticks: { callback: (v) => (format ? format(v) : v) } } } },
  });
}

// Points {x, y} on two linear axes; a dataset with line: true is drawn as a
// line through its points (in order), one with flat: true dashed without points.
// xFormat / yFormat label the axes; label(point) names a point in its tooltip;
// yLog: a logarithmic y axis (labels at 1, 2 and 5 x 10^n); onClick(point).
export function scatterChart({ title, datasets, xTitle, yTitle, xFormat = String, yFormat = String, label, yLog = false, height = 320, onClick }) {
  const r = makeChart({
    type: 'scatter',
    title,
    height,
    data: {
      datasets: datasets.map(({ line, flat, ...d }, i) => ({
        borderColor: PALETTE[i % PALETTE.length],
        backgroundColor: PALETTE[i % PALETTE.length],
        showLine: !!(line || flat),
        pointRadius: flat ? 0 : 4,
        borderDash: flat ? [6, 4] : undefined,
        borderWidth: line || flat ? 1.5 : 1,
        ...d,
      })),
    },
    tip: (c) => `${label ? label(c.raw) : ''} ${xFormat(c.raw.x)}, ${yFormat(c.raw.y)}`,
    options: {
      scales: {
        x: { type: 'linear', beginAtZero: true, title: { display: !!xTitle, text: xTitle }, ticks: { callback: (v) => xFormat(v) } },
        y: { type: yLog ? 'logarithmic' : 'linear', beginAtZero: !yLog, title: { display: !!yTitle, text: yTitle },
          ticks: { callback: (v) => (yLog && !/^[125]$/.test(String(v / 10 ** Math.floor(Math.log10(v)))) ? '' : yFormat(v)) } },
      },
      onClick: onClick ? (ev, els) => { if (els.length) onClick(r.chart.data.datasets[els[0].datasetIndex].data[els[0].index]); } : undefined,
    },
  });
  return r;
}

// Stacked areas over shared labels (e.g. live bytes by kind over program
// order), plus reference datasets drawn on top unstacked: {label, data,
// flat: true} a dashed level, {label, data, marker: true} points only (data
// null where there is none).
export function areaChart({ title, labels, datasets, refs = [], format, height = 280, xTitle }) {
  const areas = datasets.map((d, i) => ({
    borderColor: PALETTE[i % PALETTE.length],
    backgroundColor: `${PALETTE[i % PALETTE.length]}99`,
    pointRadius: 0,
    borderWidth: 1,
    fill: i === 0 ? 'origin' : '-1',
    stepped: 'middle', // one value per op, not a ramp between ops
    stack: 'live',
    ...d,
  }));
  const extra = refs.map(({ flat, marker, ...d }, i) => ({
    borderColor: marker ? '#d24f5f' : '#7a7a7a',
    backgroundColor: marker ? '#d24f5f' : '#7a7a7a',
    pointRadius: marker ? 6 : 0,
    showLine: !marker,
    borderDash: flat ? [6, 4] : undefined,
    borderWidth: 1.5,
    fill: false,
    stack: `ref${i}`,
    ...d,
  }));
  return makeChart({
    type: 'line',
    title,
    height,
    data: { labels, datasets: [...areas, ...extra] },
    tip: (c) => (format ? format(c.raw) : c.raw),
    options: {
      scales: {
        y: { stacked: true, beginAtZero: true, ticks: { callback: (v) => (format ? format(v) : v) } },
        x: { title: { display: !!xTitle, text: xTitle }, ticks: { maxTicksLimit: 12 } },
      },
    },
  });
}

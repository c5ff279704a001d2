// Bar charts with Chart.js (only the pieces we use are registered).
import { BarController, BarElement, CategoryScale, Chart, Legend, LineController, LineElement, LinearScale, PointElement, Title, Tooltip } from 'chart.js';
import { h } from './util.js';

Chart.register(BarController, BarElement, CategoryScale, LineController, LineElement, LinearScale, PointElement, Legend, Title, Tooltip);

export const PALETTE = ['#3b6fd8', '#e07b39', '#3aa676', '#b04fc2', '#d9a400', '#d24f5f', '#4fb0c2', '#7a7a7a'];

// A canvas in a fixed-size box; returns {el, chart}. format(value) labels the axis.
export function barChart({ title, labels, datasets, format, stacked = false, horizontal = false, height = 240 }) {
  const canvas = h('canvas', { role: 'img', 'aria-label': title });
  const el = h('div', { class: 'chart', style: { height: `${height}px` } }, canvas);
  const chart = new Chart(canvas, {
    type: 'bar',
    data: {
      labels,
      datasets: datasets.map((d, i) => ({ backgroundColor: PALETTE[i % PALETTE.length], ...d })),
    },
    options: {
      responsive: true,
      maintainAspectRatio: false,
      animation: false,
      indexAxis: horizontal ? 'y' : 'x',
      plugins: {
        title: { display: !!title, text: title },
        legend: { display: datasets.length > 1 },
        tooltip: { callbacks: { label: (c) => `${c.dataset.label || ''}: ${format ? format(c.raw) : c.raw}` } },
      },
      scales: {
        [horizontal ? 'x' : 'y']: { stacked, beginAtZero: true, ticks: { callback: (v) => (format ? format(v) : v) } },
        [horizontal ? 'y' : 'x']: { stacked },
      },
    },
  });
  return { el, chart };
}

// Lines over shared labels (e.g. per-iteration times); a dataset with
// flat: true is drawn dashed without points (a reference level).
export function lineChart({ title, labels, datasets, format, height = 240 }) {
  const canvas = h('canvas', { role: 'img', 'aria-label': title });
  const el = h('div', { class: 'chart', style: { height: `${height}px` } }, canvas);
  const chart = new Chart(canvas, {
    type: 'line',
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
    options: {
      responsive: true,
      maintainAspectRatio: false,
      animation: false,
      plugins: {
        title: { display: !!title, text: title },
        legend: { display: datasets.length > 1 },
        tooltip: { callbacks: { label: (c) => `${c.dataset.label || ''}: ${format ? format(c.raw) : c.raw}` } },
      },
      scales: { y: { beginAtZero: true, ticks: { callback: (v) => (format ? format(v) : v) } } },
    },
  });
  return { el, chart };
}

// Bar charts with Chart.js (only the pieces we use are registered).
import { BarController, BarElement, CategoryScale, Chart, Legend, LinearScale, Title, Tooltip } from 'chart.js';
import { h } from './util.js';

Chart.register(BarController, BarElement, CategoryScale, LinearScale, Legend, Title, Tooltip);

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

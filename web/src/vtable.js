// A virtualised table: only the rows in view (plus a margin) are in the
// DOM, so 100k rows scroll as smoothly as 100. Rows have a fixed height.
//
//   const t = vtable({columns: [{key, title, width, sort?}], rowHeight,
//                     height, cell(rowIndex, col) -> string|Node,
//                     rowClass(rowIndex) -> string, onRowClick(rowIndex),
//                     onSort(key)});
//   t.setCount(n); t.refresh(); parent.append(t.el);

import { fill, h } from './util.js';

export function vtable(opts) {
  const rowH = opts.rowHeight || 26;
  const cols = opts.columns;
  const template = cols.map((c) => c.width || '1fr').join(' ');
  let count = 0;
  let sortKey = null;
  let sortDir = 1;
  let selected = -1;

  const head = h('div', { class: 'vt-head', role: 'row', style: { gridTemplateColumns: template } });
  const renderHead = () => {
    fill(head, ...cols.map((c) => {
      const arrow = c.key === sortKey ? (sortDir > 0 ? ' \u25b2' : ' \u25bc') : '';
      const el = h('div', { class: `vt-th${c.sort ? ' sortable' : ''}`, role: 'columnheader',
        'data-key': c.key, title: c.sort ? 'sort' : null }, c.title + arrow);
      if (c.sort) {
        el.addEventListener('click', () => {
          sortDir = sortKey === c.key ? -sortDir : 1;
          sortKey = c.key;
          renderHead();
          opts.onSort && opts.onSort(sortKey, sortDir);
        });
      }
      return el;
    }));
  };
  renderHead();

  const spacer = h('div', { class: 'vt-spacer' });
  const rows = h('div', { class: 'vt-rows' });
  const body = h('div', { class: 'vt-body', style: { height: `${opts.height || 480}px` }, tabindex: '0' },
    spacer, rows);
  const el = h('div', { class: `vt ${opts.class || ''}`, role: 'table' }, head, body);

  let frame = 0;
  const render = () => {
    frame = 0;
    const top = body.scrollTop;
    const viewH = body.clientHeight || opts.height || 480;
    const first = Math.max(0, Math.floor(top / rowH) - 10);
    const last = Math.min(count, Math.ceil((top + viewH) / rowH) + 10);
    const nodes = [];
    for (let i = first; i < last; i++) {
      const extra = opts.rowClass ? opts.rowClass(i) : '';
      const row = h('div', { class: `vt-row${i === selected ? ' selected' : ''}${extra ? ` ${extra}` : ''}`,
        role: 'row', 'data-row': String(i),
        style: { top: `${i * rowH}px`, height: `${rowH}px`, gridTemplateColumns: template } });
      for (const c of cols) {
        const v = opts.cell(i, c);
        row.append(h('div', { class: 'vt-td', role: 'cell', title: typeof v === 'string' ? v : null }, v));
      }
      nodes.push(row);
    }
    fill(rows, ...nodes);
    opts.onRender && opts.onRender(first, last);
  };
  const schedule = () => {
    if (!frame) frame = requestAnimationFrame(render);
  };
  body.addEventListener('scroll', schedule, { passive: true });
  body.addEventListener('click', (ev) => {
    const r = ev.target.closest('.vt-row');
    if (!r) return;
    selected = Number(r.dataset.row);
    render();
    opts.onRowClick && opts.onRowClick(selected, ev);
  });

  return {
    el,
    setCount(n) {
      count = n;
      spacer.style.height = `${n * rowH}px`;
      if (selected >= n) selected = -1;
      schedule();
    },
    refresh: schedule,
    renderNow: render,
    select(i) {
      selected = i;
      body.scrollTop = Math.max(0, i * rowH - (body.clientHeight || 0) / 2);
      render();
    },
    get sort() {
      return { key: sortKey, dir: sortDir };
    },
  };
}

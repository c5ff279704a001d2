// The dashboard: a hash router over nine pages that use only the public
// REST API (/v1). #/plans, #/plan/ID, #/run/ID, #/mesh/ID, #/compare/ID,ID[,...],
// #/sweep?..., #/submit, #/migrations, #/migration/ID.
import './style.css';
import { getToken, setToken } from './api.js';
import { runPage } from './bench.js';
import { comparePage } from './compare.js';
import { meshPage } from './mesh.js';
import { migrationPage, migrationsPage } from './migrations.js';
import { planPage } from './plan.js';
import { plansPage } from './plans.js';
import { submitPage } from './submit.js';
import { sweepPage } from './sweep.js';
import { errorBox, fill } from './util.js';

const main = document.getElementById('main');
let current = null; // {alive, leave[]} of the page shown

function route() {
  if (current) {
    current.dead = true;
    for (const f of current.leave) f();
  }
  const ctx = { dead: false, leave: [], alive: () => !ctx.dead, onLeave: (f) => ctx.leave.push(f) };
  current = ctx;
  const path = (location.hash.replace(/^#/, '') || '/plans').split('?')[0];
  const parts = path.split('/').filter(Boolean);
  for (const a of document.querySelectorAll('[data-nav]')) a.classList.toggle('active', a.dataset.nav === (parts[0] === 'plan' ? 'plans' : parts[0] === 'migration' ? 'migrations' : parts[0]));
  let page;
  switch (parts[0]) {
    case 'plan': page = planPage(main, ctx, parts[1]); break;
    case 'compare': page = comparePage(main, ctx, parts[1]); break;
    case 'run': page = runPage(main, ctx, parts[1]); break;
    case 'mesh': page = meshPage(main, ctx, parts[1]); break;
    case 'submit': page = submitPage(main, ctx); break;
    case 'sweep': page = sweepPage(main, ctx); break;
    case 'migrations': page = migrationsPage(main, ctx); break;
    case 'migration': page = migrationPage(main, ctx, parts[1]); break;
    default: page = plansPage(main, ctx);
  }
  main.dataset.page = parts[0] || 'plans';
  delete main.dataset.ready;
  Promise.resolve(page).catch((err) => fill(main, errorBox(err))).finally(() => {
    if (!ctx.dead) main.dataset.ready = '1';
  });
}

const tokenInput = document.getElementById('token');
tokenInput.value = getToken();
document.getElementById('token-form').addEventListener('submit', (e) => {
  e.preventDefault();
  setToken(tokenInput.value.trim());
  route();
});
document.getElementById('token-clear').addEventListener('click', () => {
  tokenInput.value = '';
  setToken('');
  route();
});
window.addEventListener('hashchange', route);
route();

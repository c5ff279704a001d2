// The public REST API (/v1, docs/api.md). Every call sends the session's
// token as a bearer token; errors are thrown as ApiError carrying the
// server's {"error":{"code","message","path"}} document unchanged.

const TOKEN_KEY = 'shardplan.token';

export function getToken() {
  return sessionStorage.getItem(TOKEN_KEY) || '';
}

export function setToken(t) {
  if (t) sessionStorage.setItem(TOKEN_KEY, t);
  else sessionStorage.removeItem(TOKEN_KEY);
}

export class ApiError extends Error {
  constructor(status, body, text) {
    const e = body && body.error ? body.error : null;
    super(e ? `HTTP ${status} ${e.code}: ${e.message}${e.path ? ` (at ${e.path})` : ''}`
            : `HTTP ${status}: ${text || 'no body'}`);
    this.status = status;
    this.body = body;   // the parsed error document, as the API sent it
    this.text = text;   // the raw body
  }
}

export async function api(path, { method = 'GET', body, contentType, signal } = {}) {
  const headers = {};
  const t = getToken();
  if (t) headers.Authorization = `Bearer ${t}`;
  if (body !== undefined) headers['Content-Type'] = contentType || 'application/json';
  let res;
  try {
    res = await fetch(path, { method, headers, body, signal });
  } catch (err) {
    if (err.name === 'AbortError') throw err;
    throw new ApiError(0, null, `network error: ${err.message}`);
  }
  const text = await res.text();
  let json = null;
  try {
    json = text ? JSON.parse(text) : null;
  } catch {
    json = null;
  }
  if (!res.ok) throw new ApiError(res.status, json, text);
  return { status: res.status, json, text, headers: res.headers };
}

export async function getJson(path, opts) {
  return (await api(path, opts)).json;
}

// Every page of a list resource (limit 1000 per request, following next_after).
export async function listAll(collection, query = '') {
  const items = [];
  let after = 0;
  for (let guard = 0; guard < 10000; guard++) {
    const sep = query ? `&${query}` : '';
    const page = await getJson(`/v1/${collection}?limit=1000&after=${after}${sep}`);
    items.push(...page.items);
    if (!page.next_after) break;
    after = page.next_after;
  }
  return items;
}

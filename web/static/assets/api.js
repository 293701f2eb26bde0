// A small client for the broker's public API (openapi/openapi.yaml). Every
// call resolves to the decoded JSON body or rejects with an ApiError whose
// `kind` says what the views should tell the user.

const TOKEN_KEY = 'queen.token';
const TENANT_KEY = 'queen.tenant';
const TIMEOUT_MS = 15000;

// Error kinds, from the most to the least specific.
export const Kind = {
  network: 'network',         // the broker did not answer
  auth: 'auth',               // 401: a token is needed or was refused
  forbidden: 'forbidden',     // 403: the token's role may not do this
  unavailable: 'unavailable', // the route is not served by this broker
  notFound: 'not-found',      // 404 from a route that exists
  bad: 'bad',                 // other 4xx
  server: 'server',           // 5xx
};

export class ApiError extends Error {
  constructor(kind, status, message, body) {
    super(message);
    this.kind = kind;
    this.status = status;
    this.body = body;
  }
}

export function getToken() {
  return sessionStorage.getItem(TOKEN_KEY) || '';
}

export function setToken(token) {
  const t = token.trim().replace(/^bearer\s+/i, '');
  if (t) sessionStorage.setItem(TOKEN_KEY, t);
  else sessionStorage.removeItem(TOKEN_KEY);
}

// The tenant the dashboard acts for when the broker runs with native
// tenancy (docs/tenancy.md), sent as x-queen-tenant; '' is the default
// tenant (no header). Kept in localStorage: it is not a secret, and a
// broker without tenancy ignores the header.
export const DEFAULT_TENANT = '00000000-0000-0000-0000-000000000001';
const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

export function getTenant() {
  return localStorage.getItem(TENANT_KEY) || '';
}

// setTenant stores a tenant in the broker's canonical form, and reports
// whether it is one (a UUID, any case, surrounding space ignored).
export function setTenant(tenant) {
  const t = tenant.trim().toLowerCase();
  if (t && !UUID_RE.test(t)) return false;
  if (t && t !== DEFAULT_TENANT) localStorage.setItem(TENANT_KEY, t);
  else localStorage.removeItem(TENANT_KEY);
  return true;
}

export function kindOf(status, message, code) {
  if (status === 401) return Kind.auth;
  if (status === 403) return Kind.forbidden;
  // The broker's router answers unknown API paths with "no route for …";
  // 405 and 501 also mean "this broker does not serve it", and so does
  // queen-proxy's route_blocked (a route it does not let this session reach).
  if ((status === 404 && (/^no route for /.test(message) || code === 'route_blocked')) || status === 405 || status === 501) return Kind.unavailable;
  if (status === 404) return Kind.notFound;
  if (status >= 500) return Kind.server;
  return Kind.bad;
}

async function request(method, path, { query, body } = {}) {
  const url = new URL(path, location.origin);
  for (const [k, v] of Object.entries(query || {})) {
    if (v !== undefined && v !== null && v !== '') url.searchParams.set(k, v);
  }
  const headers = { Accept: 'application/json' };
  const token = getToken();
  if (token) headers.Authorization = `Bearer ${token}`;
  const tenant = getTenant();
  if (tenant) headers['x-queen-tenant'] = tenant;
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  const ctl = new AbortController();
  const timer = setTimeout(() => ctl.abort(), TIMEOUT_MS);
  let res;
  try {
    res = await fetch(url, {
      method, headers, signal: ctl.signal, cache: 'no-store',
      body: body === undefined ? undefined : JSON.stringify(body),
    });
  } catch (e) {
    const why = e.name === 'AbortError' ? 'timed out' : 'is unreachable';
    throw new ApiError(Kind.network, 0, `The broker at ${location.host} ${why}.`);
  } finally {
    clearTimeout(timer);
  }
  const text = await res.text().catch(() => '');
  let data = null;
  if (text) {
    try { data = JSON.parse(text); } catch { data = text; }
  }
  if (!res.ok) {
    const message = (data && typeof data === 'object' && data.error) || (typeof data === 'string' && data) || res.statusText;
    throw new ApiError(kindOf(res.status, String(message), data && data.code), res.status, String(message), data);
  }
  return data;
}

const get = (path, query) => request('GET', path, { query });
const post = (path, body) => request('POST', path, { body: body ?? {} });
const del = (path, query) => request('DELETE', path, { query });
const seg = encodeURIComponent;

// One function per route the dashboard uses, named after the operationId.
export const api = {
  getHealth: () => get('/health'),
  getIdentity: () => get('/auth/me'),
  listTenants: () => get('/api/v1/tenants'),
  getMetrics: () => get('/metrics'),

  getOverview: () => get('/api/v1/resources/overview'),
  listQueues: (q) => get('/api/v1/resources/queues', q),
  // The summary shows the totals only; limit 0 skips the partition list.
  getQueue: (name) => get(`/api/v1/resources/queues/${seg(name)}`, { limit: 0 }),
  deleteQueue: (name) => del(`/api/v1/resources/queues/${seg(name)}`),
  listPartitions: (q) => get('/api/v1/resources/partitions', q),

  listMessages: (q) => get('/api/v1/messages', q),
  getMessage: (pid, tid) => get(`/api/v1/messages/${seg(pid)}/${seg(tid)}`),
  deleteMessage: (pid, tid) => del(`/api/v1/messages/${seg(pid)}/${seg(tid)}`),
  retryMessage: (pid, tid, body) => post(`/api/v1/messages/${seg(pid)}/${seg(tid)}/retry`, body),
  moveMessageToDLQ: (pid, tid, body) => post(`/api/v1/messages/${seg(pid)}/${seg(tid)}/dlq`, body),
  getMessageTraces: (pid, tid) => get(`/api/v1/traces/${seg(pid)}/${seg(tid)}`),

  listDeadLetters: (q) => get('/api/v1/dlq', q),

  listConsumerGroups: () => get('/api/v1/consumer-groups'),
  listLaggingPartitions: (minLagSeconds, limit) => get('/api/v1/consumer-groups/lagging', { minLagSeconds, limit }),
  seekConsumerGroup: (group, queue, body) => post(`/api/v1/consumer-groups/${seg(group)}/queues/${seg(queue)}/seek`, body),
  deleteConsumerGroupForQueue: (group, queue, deleteMetadata) =>
    del(`/api/v1/consumer-groups/${seg(group)}/queues/${seg(queue)}`, { deleteMetadata }),

  listTraceNames: (q) => get('/api/v1/traces/names', q),
  listTracesByName: (name, q) => get(`/api/v1/traces/by-name/${seg(name)}`, q),

  getStatus: (q) => get('/api/v1/status', q),
  getWorkerMetrics: (q) => get('/api/v1/analytics/worker-metrics', q),
  getQueueOps: (q) => get('/api/v1/analytics/queue-ops', q),
  getRetentionAnalytics: (q) => get('/api/v1/analytics/retention', q),
  getSystemMetrics: (q) => get('/api/v1/analytics/system-metrics', q),
  getPostgresStats: () => get('/api/v1/analytics/postgres-stats'),

  getMaintenance: () => get('/api/v1/system/maintenance'),
  setMaintenance: (enabled) => post('/api/v1/system/maintenance', { enabled }),
  getPopMaintenance: () => get('/api/v1/system/maintenance/pop'),
  setPopMaintenance: (enabled) => post('/api/v1/system/maintenance/pop', { enabled }),
  getBuffers: () => get('/api/v1/status/buffers'),

  migrationTestConnection: (target) => post('/api/v1/migration/test-connection', target),
  migrationStart: (body) => post('/api/v1/migration/start', body),
  migrationStatus: () => get('/api/v1/migration/status'),
  migrationValidate: (target) => post('/api/v1/migration/validate', target),
  migrationReset: () => post('/api/v1/migration/reset'),
};

// range returns {from, to} ISO strings for the last `minutes`.
export function range(minutes) {
  const to = new Date();
  return { from: new Date(to.getTime() - minutes * 60000).toISOString(), to: to.toISOString() };
}

// The Shepherd dashboard: plain JavaScript, no build step, no third-party code. It reads the REST API with
// the token the user pastes (kept in sessionStorage, so for this tab only) and polls every few seconds.
// Write buttons appear only for roles the route table lets write (GET /v1/whoami names the role).
'use strict';

const POLL_MS = 3000;
const TOKEN_KEY = 'shepherd.token';
const FINDING_KINDS = ['heartbeat_lost', 'node_lost', 'hang', 'straggler', 'sdc_suspected', 'sdc_confirmed',
  'sdc_transient', 'loss_spike', 'nonfinite_loss', 'grad_norm_spike', 'process_exit', 'gpu_fault',
  'restart_requested', 'loss_divergence'];
const NODE_STATES = ['available', 'allocated', 'spare', 'cordoned', 'failed'];

const state = {
  token: sessionStorage.getItem(TOKEN_KEY) || '',
  who: null,            // {name, role} once known
  timer: null,
  generation: 0,        // a render started before the latest navigation is dropped
  selectedNode: null,
};

class ApiError extends Error {
  constructor(status, detail, fields) {
    super(detail);
    this.status = status;
    this.fields = fields || [];
  }
}

async function api(method, path, body) {
  const headers = { Accept: 'application/json' };
  if (state.token) headers.Authorization = 'Bearer ' + state.token;
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  let res;
  try {
    res = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  } catch (e) {
    throw new ApiError(0, 'cannot reach the daemon (' + e.message + ')');
  }
  const text = await res.text();
  let json = null;
  try { json = text ? JSON.parse(text) : null; } catch (e) { json = null; }
  if (!res.ok) {
    const detail = (json && (json.detail || json.title)) || (res.status + ' ' + res.statusText);
    throw new ApiError(res.status, detail, json && json.errors);
  }
  return json;
}

// Every page of a paged list (docs/api.md, "Pagination"), up to `maxPages`.
async function getAll(path, key, maxPages = 20) {
  const out = [];
  let cursor = null;
  let first = null;
  for (let i = 0; i < maxPages; i++) {
    const sep = path.includes('?') ? '&' : '?';
    const page = await api('GET', cursor ? path + sep + 'cursor=' + encodeURIComponent(cursor) : path);
    if (!first) first = page;
    out.push(...(page[key] || []));
    cursor = page.next_cursor;
    if (!cursor) break;
  }
  return { items: out, first };
}

// 404 is an answer here ("not there"), not an error.
async function optional(path) {
  try { return await api('GET', path); } catch (e) { if (e.status === 404) return null; throw e; }
}

function esc(v) {
  return String(v === undefined || v === null ? '' : v).replace(/[&<>"']/g,
    (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' }[c]));
}
const dash = '—';
function num(v, digits) {
  if (v === undefined || v === null || Number.isNaN(v)) return dash;
  return typeof v === 'number' && digits !== undefined ? v.toFixed(digits) : String(v);
}
function when(iso) { return iso ? new Date(iso).toLocaleString() : dash; }
function jobLink(id) { return '<a href="#/job/' + encodeURIComponent(id) + '">' + esc(id) + '</a>'; }

// ---- errors and the token ----

function showError(e) {
  const box = document.getElementById('error');
  if (!e) { box.classList.add('hidden'); box.innerHTML = ''; return; }
  const fields = (e.fields || []).map((f) => '<li><code>' + esc(f.field) + '</code>: ' + esc(f.message) + '</li>');
  box.innerHTML = '<strong>' + (e.status ? esc(e.status) + ': ' : '') + esc(e.message) + '</strong>' +
    (fields.length ? '<ul>' + fields.join('') + '</ul>' : '');
  box.classList.remove('hidden');
  if (e.status === 401) askToken('The daemon wants a token: ' + e.message);
}

function askToken(why) {
  document.getElementById('token-form').classList.remove('hidden');
  document.getElementById('token-why').textContent = why || '';
  document.getElementById('token-input').focus();
}

async function loadWho() {
  try {
    state.who = await api('GET', '/v1/whoami');
  } catch (e) {
    state.who = null;
    if (e.status !== 404) throw e;
    state.who = { name: '?', role: 'viewer' };  // an older daemon: show no write buttons
  }
  document.getElementById('who').textContent = state.who.name + ' (' + state.who.role + ')';
}

function canOperate() { return !!state.who && (state.who.role === 'admin' || state.who.role === 'operator'); }
function canWriteJob(job) {
  if (canOperate()) return true;
  const owner = job.owner || (job.spec && job.spec.owner);
  return !!state.who && state.who.role === 'submitter' && owner === state.who.name;
}

// ---- fleet ----

async function renderFleet(main) {
  const { items: nodes, first } = await getAll('/v1/nodes', 'nodes');
  const counts = Object.fromEntries(NODE_STATES.map((s) => [s, 0]));
  for (const n of nodes) counts[n.state] = (counts[n.state] || 0) + 1;
  const spines = new Map();
  for (const n of nodes) {
    const t = n.topology || {};
    const spine = t.spine || '(no spine)';
    const leaf = t.leaf || '(no leaf)';
    if (!spines.has(spine)) spines.set(spine, new Map());
    const leaves = spines.get(spine);
    if (!leaves.has(leaf)) leaves.set(leaf, []);
    leaves.get(leaf).push(n);
  }
  const legend = NODE_STATES.map((s) => '<span><i class="sw st-' + s + '"></i>' + s +
    ' <b data-count="' + s + '">' + counts[s] + '</b></span>').join('');
  const summary = first && first.summary ? first.summary : {};
  let html = '<div class="layout"><div><div class="card"><h2>Fleet: <span data-count="nodes">' + nodes.length +
    '</span> nodes, ' + num(summary.free_usable_gpus) + ' free usable GPUs</h2><div class="legend">' + legend +
    '</div>';
  for (const [spine, leaves] of [...spines].sort()) {
    html += '<div class="spine" data-spine="' + esc(spine) + '"><h3>spine ' + esc(spine) + '</h3><div class="leaves">';
    for (const [leaf, ns] of [...leaves].sort()) {
      html += '<div class="leaf" data-leaf="' + esc(leaf) + '"><h3>leaf ' + esc(leaf) + '</h3><div class="cells">';
      for (const n of ns.sort((a, b) => a.id.localeCompare(b.id))) {
        const jobs = (n.jobs || []).map((j) => (typeof j === 'string' ? j : j.id || j.job)).join(',');
        const sub = n.state === 'allocated' ? jobs : n.state === 'cordoned' || n.state === 'failed' ? n.reason || n.state : n.state;
        const title = n.id + ': ' + n.state + (jobs ? ' (job ' + jobs + ')' : '') + (n.reason ? ' — ' + n.reason : '');
        html += '<button type="button" class="node st-' + esc(n.state) + (state.selectedNode === n.id ? ' selected' : '') +
          '" data-node="' + esc(n.id) + '" data-state="' + esc(n.state) + '" title="' + esc(title) + '">' +
          '<span class="nid">' + esc(n.id) + '</span><span class="nsub">' + esc(sub) + '</span></button>';
      }
      html += '</div></div>';
    }
    html += '</div></div>';
  }
  html += '</div></div><div id="node-detail" class="card">' + nodeDetail(nodes.find((n) => n.id === state.selectedNode)) +
    '</div></div>';
  main.innerHTML = html;
}

function nodeDetail(n) {
  if (!n) return '<p class="muted">Click a node for its detail.</p>';
  const t = n.topology || {};
  const jobs = (n.jobs || []).map((j) => jobLink(typeof j === 'string' ? j : j.id || j.job)).join(', ');
  let html = '<h2 data-detail-node="' + esc(n.id) + '">' + esc(n.id) + '</h2><dl>' +
    '<dt>state</dt><dd class="state" data-field="state">' + esc(n.state) + '</dd>' +
    '<dt>reason</dt><dd>' + esc(n.reason || dash) + '</dd>' +
    '<dt>hostname</dt><dd>' + esc(n.hostname) + '</dd>' +
    '<dt>GPUs</dt><dd>' + esc(n.allocated_gpus || 0) + ' of ' + esc(n.gpus) + ' allocated · ' + esc(n.gpu_model) +
    ' · ' + esc(n.gpu_memory_gib) + ' GiB</dd>' +
    '<dt>topology</dt><dd>' + esc(Object.entries(t).map(([k, v]) => k + '=' + v).join(' ')) + '</dd>' +
    '<dt>jobs</dt><dd>' + (jobs || dash) + '</dd>' +
    '<dt>agent</dt><dd>' + (n.agent_attached ? 'attached' : 'not attached') + '</dd>' +
    '<dt>updated</dt><dd>' + esc(when(n.updated_at)) + '</dd></dl>';
  if (canOperate()) {
    html += '<div class="actions write">' +
      '<input id="node-reason" placeholder="reason" size="18">' +
      (n.state === 'cordoned'
        ? '<button type="button" data-action="uncordon" data-id="' + esc(n.id) + '">Uncordon</button>'
        : '<button type="button" data-action="cordon" data-id="' + esc(n.id) + '">Cordon</button>') + '</div>';
  }
  return html;
}

// ---- jobs ----

async function jobFacts(job) {
  const live = job.state === 'running' || job.state === 'launching';
  const [health, goodput] = await Promise.all([
    live ? optional('/v1/jobs/' + encodeURIComponent(job.id) + '/health') : null,
    optional('/v1/jobs/' + encodeURIComponent(job.id) + '/goodput'),
  ]);
  return { health, goodput };
}

function ettrOf(goodput) {
  return goodput && typeof goodput.ettr === 'number' ? (100 * goodput.ettr).toFixed(1) + '%' : dash;
}

// Where the job's wall time went (GET /v1/jobs/{id}/goodput, docs/goodput.md): a bar of its buckets, the
// buckets with their GPU-hours, badput by cause, and the checkpoint advice. The bar's widths and colours
// are set from its data attributes once drawn (paintBuckets): the page's policy forbids inline styles.
const bucketColors = {
  productive: '#2e7d32', startup: '#90a4ae', queued: '#cfd8dc', checkpoint_save: '#5c6bc0',
  lost_progress: '#e53935', detection: '#fb8c00', recovery: '#fdd835', backoff: '#8d6e63', unattributed: '#9e9e9e',
};
function paintBuckets(root) {
  root.querySelectorAll('.bucketbar span[data-width]').forEach((e) => {
    e.style.width = e.dataset.width;
    e.style.backgroundColor = e.dataset.color;
  });
}
function goodputCard(g) {
  if (!g) return '<div class="card"><h2>Goodput</h2><p>' + dash + '</p></div>';
  const wall = g.wall_s || 0;
  const entries = Object.entries(g.buckets || {});
  const bar = entries.filter(([, b]) => wall > 0 && b.seconds > 0).map(([name, b]) =>
    '<span title="' + esc(name) + '" data-width="' + (100 * b.seconds / wall).toFixed(2) + '%" data-color="' +
    (bucketColors[name] || '#bbb') + '"></span>').join('');
  const rows = entries.map(([name, b]) => '<tr data-bucket="' + esc(name) + '"><td>' + esc(name) + '</td><td>' +
    num(b.seconds, 1) + '</td><td>' + num(b.gpu_hours, 2) + '</td><td>' +
    (wall > 0 ? (100 * b.seconds / wall).toFixed(1) + '%' : dash) + '</td></tr>').join('');
  const causes = Object.entries(g.by_cause || {}).map(([cause, c]) => '<tr data-cause="' + esc(cause) + '"><td>' +
    esc(cause) + '</td><td>' + esc(c.incidents) + '</td><td>' + num(c.seconds, 1) + '</td><td>' + num(c.gpu_hours, 2) +
    '</td></tr>').join('');
  const a = g.checkpoint_advice;
  const advice = a ? 'checkpoint every ' + num(a.interval_s, 0) + ' s (now ' + num(a.current_interval_s, 0) +
    ' s): expected ETTR ' + (100 * a.ettr_advised).toFixed(1) + '%' +
    (typeof a.ettr_now === 'number' ? ' (now ' + (100 * a.ettr_now).toFixed(1) + '%)' : '')
    : esc((g.checkpoint_advice_reason) || 'no checkpoint save measured yet');
  return '<div class="card"><h2>Goodput: <span data-field="goodput-ettr">' + ettrOf(g) + '</span> of ' +
    num(wall, 0) + ' s</h2><div class="bucketbar">' + bar + '</div>' +
    '<table><thead><tr><th>bucket</th><th>seconds</th><th>GPU-hours</th><th>share</th></tr></thead><tbody>' + rows +
    '</tbody></table>' + (causes ? '<table><thead><tr><th>cause</th><th>incidents</th><th>seconds</th><th>GPU-hours</th>' +
    '</tr></thead><tbody>' + causes + '</tbody></table>' : '') + '<p data-field="advice">' + advice + '</p></div>';
}

async function renderJobs(main) {
  const { items: jobs } = await getAll('/v1/jobs', 'jobs');
  const shown = jobs.slice(-100).reverse();
  const facts = await Promise.all(shown.map(jobFacts));
  const byState = {};
  for (const j of jobs) byState[j.state] = (byState[j.state] || 0) + 1;
  let html = '<div class="card"><h2>Jobs: <span data-count="jobs">' + jobs.length + '</span></h2><div class="legend">' +
    Object.entries(byState).map(([s, n]) => '<span>' + esc(s) + ' <b data-count="' + esc(s) + '">' + n + '</b></span>').join('') +
    '</div><table><thead><tr><th>job</th><th>name</th><th>state</th><th>attempt</th><th>step</th>' +
    '<th>step time (s)</th><th>ETTR</th><th>owner</th></tr></thead><tbody>';
  shown.forEach((j, i) => {
    const h = facts[i].health;
    const checks = h ? h.checks : null;
    const step = checks ? checks.hang.job_step : null;
    const stepTime = checks ? checks.straggler.job_median_step_time_s : null;
    html += '<tr data-job="' + esc(j.id) + '"><td>' + jobLink(j.id) + '</td><td>' + esc(j.name) + '</td>' +
      '<td class="state" data-field="state">' + esc(j.state) + '</td><td data-field="attempt">' + esc(j.attempt) + '</td>' +
      '<td data-field="step">' + num(step) + '</td><td>' + num(stepTime || null, 3) + '</td>' +
      '<td data-field="ettr">' + ettrOf(facts[i].goodput) + '</td><td>' + esc(j.owner || (j.spec && j.spec.owner) || dash) + '</td></tr>';
  });
  html += '</tbody></table></div>';
  main.innerHTML = html;
}

// ---- one job ----

// The attempt's final steps as the daemon kept them (GET /v1/jobs/{id}/steps), oldest first.
function stepSeries(steps) {
  return ((steps && steps.steps) || []).map((p) => ({ step: p.step, loss: p.loss, stepTime: p.step_time_s }));
}

function restartActions(f) { return (f.actions || []).filter((a) => /restart|attempt/i.test(a)); }

// Attempts on one time axis: each starts where the finding that ended the one before was detected.
function timeline(job, findings, checkpoints) {
  const created = Date.parse(job.created_at || (job.current_attempt && job.current_attempt.started_at)) || Date.now();
  const end = Math.max(Date.now(), ...findings.map((f) => Date.parse(f.detected_at) || 0));
  const span = Math.max(1, end - created);
  const W = 900, left = 90, right = 10, H = 150;
  const x = (t) => left + ((t - created) / span) * (W - left - right);
  const attempts = [];
  const n = job.attempt || 1;
  for (let a = 1; a <= n; a++) {
    const ended = findings.filter((f) => f.attempt === a && restartActions(f).length).map((f) => Date.parse(f.detected_at));
    attempts.push({ a, end: ended.length ? Math.min(...ended) : null });
  }
  let start = created;
  let svg = '<svg viewBox="0 0 ' + W + ' ' + H + '" width="100%" role="img" aria-label="timeline">' +
    '<text x="4" y="24">attempts</text><text x="4" y="64">findings</text><text x="4" y="104">checkpoints</text>';
  for (const at of attempts) {
    const stop = at.a === n && job.current_attempt && !job.current_attempt.ended_at ? end : at.end || end;
    const s = at.a === n && job.current_attempt ? Date.parse(job.current_attempt.started_at) || start : start;
    svg += '<rect data-attempt="' + at.a + '" x="' + x(s).toFixed(1) + '" y="12" height="16" width="' +
      Math.max(2, x(stop) - x(s)).toFixed(1) + '" fill="' + (at.a === n ? '#3b82c4' : '#9aa3b0') + '"><title>attempt ' +
      at.a + '</title></rect><text x="' + (x(s) + 3).toFixed(1) + '" y="24" fill="#fff">' + at.a + '</text>';
    start = stop;
  }
  findings.forEach((f, i) => {
    const fx = x(Date.parse(f.detected_at) || end);
    svg += '<g data-finding-kind="' + esc(f.kind) + '"><circle cx="' + fx.toFixed(1) + '" cy="60" r="6" fill="#d9534f"><title>' +
      esc(f.kind + ' at step ' + f.step + ': ' + f.detail + ' → ' + (f.actions || []).join('; ')) + '</title></circle>' +
      '<text x="' + (fx + 8).toFixed(1) + '" y="' + (56 + (i % 3) * 12) + '">' + esc(f.kind) + '</text></g>';
  });
  const colour = { good: '#2e9e5b', complete: '#3b82c4', bad: '#d9534f' };
  for (const c of checkpoints) {
    const cx = x(Date.parse(c.updated_at || c.created_at) || end);
    svg += '<rect data-checkpoint-status="' + esc(c.status) + '" x="' + (cx - 4).toFixed(1) + '" y="96" width="8" height="8" fill="' +
      (colour[c.status] || '#9aa3b0') + '"><title>checkpoint step ' + esc(c.step) + ': ' + esc(c.status) + '</title></rect>';
  }
  svg += '<text x="' + left + '" y="' + (H - 4) + '">' + esc(new Date(created).toLocaleTimeString()) + '</text>' +
    '<text x="' + (W - right - 60) + '" y="' + (H - 4) + '">' + esc(new Date(end).toLocaleTimeString()) + '</text></svg>';
  return svg;
}

function chart(points, key, label) {
  const pts = points.filter((p) => typeof p[key] === 'number' && Number.isFinite(p[key]));
  if (pts.length < 2) return '<h3>' + esc(label) + '</h3><p class="muted" data-chart="' + key + '" data-points="' +
    pts.length + '">' + pts.length + ' final step(s) so far</p>';
  const W = 420, H = 140, pad = 30;
  const xs = pts.map((p) => p.step), ys = pts.map((p) => p[key]);
  const x0 = Math.min(...xs), x1 = Math.max(...xs), y0 = Math.min(...ys), y1 = Math.max(...ys);
  const sx = (v) => pad + ((v - x0) / Math.max(1e-9, x1 - x0)) * (W - 2 * pad);
  const sy = (v) => H - pad - ((v - y0) / Math.max(1e-9, y1 - y0)) * (H - 2 * pad);
  const path = pts.map((p, i) => (i ? 'L' : 'M') + sx(p.step).toFixed(1) + ' ' + sy(p[key]).toFixed(1)).join(' ');
  return '<h3>' + esc(label) + '</h3><svg data-chart="' + key + '" data-points="' + pts.length + '" viewBox="0 0 ' + W + ' ' + H + '" width="100%">' +
    '<path d="' + path + '" fill="none" stroke="#3b82c4" stroke-width="1.5"/>' +
    '<text x="2" y="' + (pad - 4) + '">' + esc(y1.toPrecision(4)) + '</text><text x="2" y="' + (H - pad) + '">' +
    esc(y0.toPrecision(4)) + '</text><text x="' + pad + '" y="' + (H - 8) + '">step ' + x0 + '</text><text x="' +
    (W - pad - 50) + '" y="' + (H - 8) + '">step ' + x1 + '</text></svg>';
}

// A rank's colour says how long ago it last reported (health.ranks.last_seen_s, at updated_at): fresh is
// green, shading to red at the heartbeat timeout; verdicts (lost, suspect, straggler) keep their colours.
// A rank silent for a quarter of the timeout is marked late.
function latenessColour(age, timeout) {
  const f = Math.max(0, Math.min(1, age / Math.max(1e-9, timeout)));
  return 'hsl(' + Math.round(120 * (1 - f)) + ', 65%, ' + Math.round(55 - 10 * f) + '%)';
}

function rankGrid(health) {
  if (!health) return '<p class="muted">No running attempt.</p>';
  const hb = health.checks.heartbeat;
  const lost = new Set(hb.lost_ranks || []);
  const suspects = new Set((health.suspects && health.suspects.ranks) || []);
  const stragglers = new Set(health.checks.straggler.ranks || []);
  const seen = (health.ranks && health.ranks.last_seen_s) || null;
  const summary = health.ranks && health.ranks.summary;
  const n = Math.min(hb.ranks, 4096);
  let html = '<p>' + esc(hb.ranks_reporting) + ' of ' + esc(hb.ranks) + ' ranks reporting; oldest report ' +
    num(hb.oldest_report_age_s, 1) + ' s ago (timeout ' + esc(hb.timeout_s) + ' s)</p>';
  if (summary) {
    return html + '<p data-field="lateness-summary">Too many ranks to draw: last report median ' + num(summary.median_s, 1) +
      ' s, p99 ' + num(summary.p99_s, 1) + ' s, max ' + num(summary.max_s, 1) + ' s ago; ' +
      esc(summary.never_reported) + ' never reported.</p>';
  }
  html += '<div class="grid">';
  for (let r = 0; r < n; r++) {
    const age = seen ? seen[r] : undefined;
    const late = typeof age === 'number' && age >= hb.timeout_s / 4;
    const cls = lost.has(r) ? 'lost' : suspects.has(r) ? 'suspect' : stragglers.has(r) ? 'straggler' :
      age === null || hb.ranks_reporting === 0 ? 'never' : late ? 'late' : 'ok';
    // Coloured by paintLateness after rendering: the page's CSP refuses inline style attributes.
    const shade = (cls === 'ok' || cls === 'late') && typeof age === 'number'
      ? ' data-shade="' + latenessColour(age, hb.timeout_s) + '"' : '';
    const ageText = typeof age === 'number' ? ', last report ' + age.toFixed(1) + ' s ago' : '';
    html += '<span class="rank ' + cls + '" data-rank="' + r + '"' +
      (typeof age === 'number' ? ' data-last-seen-s="' + age + '"' : '') + shade + ' title="rank ' + r + ': ' + cls +
      ageText + '">' + r + '</span>';
  }
  return html + '</div>';
}

function paintLateness(root) {
  root.querySelectorAll('.rank[data-shade]').forEach((e) => { e.style.backgroundColor = e.dataset.shade; });
}

async function renderJob(main, id) {
  const base = '/v1/jobs/' + encodeURIComponent(id);
  const job = await api('GET', base);
  const live = job.state === 'running' || job.state === 'launching';
  const [health, failures, checkpoints, goodput, steps] = await Promise.all([
    live ? optional(base + '/health') : null,
    getAll(base + '/failures', 'failures'),
    api('GET', base + '/checkpoints'),
    optional(base + '/goodput'),
    live ? optional(base + '/steps?limit=2000') : null,
  ]);
  const findings = failures.items.slice().sort((a, b) => Date.parse(a.detected_at) - Date.parse(b.detected_at));
  const cps = checkpoints.checkpoints || [];
  const series = stepSeries(steps);
  const lastRestart = findings.filter((f) => restartActions(f).length).pop();
  const why = lastRestart
    ? esc(lastRestart.kind) + ' at step ' + esc(lastRestart.step) + ' (attempt ' + esc(lastRestart.attempt) + '): ' +
      esc(lastRestart.detail) + ' → ' + esc((lastRestart.actions || []).join('; '))
    : (job.attempt || 1) > 1 && job.current_attempt ? esc(job.current_attempt.reason)
    : 'no restart (attempt 1)';
  const ended = ['succeeded', 'failed', 'cancelled'].includes(job.state);
  let html = '<div class="card"><h2>Job ' + esc(job.id) + ' · ' + esc(job.name) + '</h2><dl>' +
    '<dt>state</dt><dd class="state" data-field="state">' + esc(job.state) + '</dd>' +
    '<dt>attempt</dt><dd data-field="attempt">' + esc(job.attempt) + '</dd>' +
    '<dt>health</dt><dd data-field="health">' + esc(health ? health.status : dash) + '</dd>' +
    '<dt>step</dt><dd data-field="step">' + num(health ? health.checks.hang.job_step : null) + '</dd>' +
    '<dt>ETTR</dt><dd data-field="ettr">' + ettrOf(goodput) + '</dd>' +
    '<dt>last-known-good</dt><dd>' + esc(checkpoints.last_known_good ? checkpoints.last_known_good.step !== undefined ?
      'step ' + checkpoints.last_known_good.step : JSON.stringify(checkpoints.last_known_good) : dash) + '</dd>' +
    '<dt>why the last restart</dt><dd data-field="why-restart">' + why + '</dd>' +
    '<dt>reason</dt><dd>' + esc(job.reason || dash) + '</dd></dl>';
  if (canWriteJob(job) && !ended) {
    html += '<div class="actions write"><button type="button" data-action="cancel" data-id="' + esc(job.id) + '">Cancel</button>' +
      (job.spec && job.spec.command && job.spec.command.length
        ? '<button type="button" data-action="restart" data-id="' + esc(job.id) + '">Restart from last-known-good</button>' : '') +
      '</div>';
  }
  html += '</div><div class="card"><h2>Timeline</h2>' + timeline(job, findings, cps) + '</div>' + goodputCard(goodput) +
    '<div class="card charts"><div>' + chart(series, 'loss', 'loss') + '</div><div>' +
    chart(series, 'stepTime', 'median step time (s)') + '</div></div>' +
    '<div class="card"><h2>Ranks</h2>' + rankGrid(health) + '</div>' +
    '<div class="card"><h2>Findings: <span data-count="findings">' + findings.length + '</span></h2>' + failureTable(findings.slice().reverse()) + '</div>' +
    '<div class="card"><h2>Checkpoints</h2><table><thead><tr><th>step</th><th>attempt</th><th>grade</th><th>reason</th>' +
    '<th>path</th></tr></thead><tbody>' + cps.map((c) => '<tr><td>' + esc(c.step) + '</td><td>' + esc(c.attempt) +
    '</td><td data-grade="' + esc(c.status) + '">' + esc(c.status) + '</td><td>' + esc(c.reason || '') + '</td><td>' +
    esc(c.path) + '</td></tr>').join('') + '</tbody></table></div>';
  main.innerHTML = html;
  paintLateness(main);
  paintBuckets(main);
}

// ---- failures ----

function failureTable(fs) {
  return '<table><thead><tr><th>time</th><th>kind</th><th>job</th><th>attempt</th><th>step</th><th>nodes</th>' +
    '<th>ranks</th><th>detail</th><th>actions</th></tr></thead><tbody>' + fs.map((f) =>
    '<tr data-finding="' + esc(f.id) + '"><td>' + esc(when(f.detected_at)) + '</td><td data-field="kind">' + esc(f.kind) +
    '</td><td>' + jobLink(f.job) + '</td><td>' + esc(f.attempt) + '</td><td>' + num(f.step) + '</td><td>' +
    esc((f.nodes || []).join(', ')) + '</td><td>' + esc((f.ranks || []).slice(0, 16).join(', ')) + '</td><td>' +
    esc(f.detail) + '</td><td>' + esc((f.actions || []).join('; ')) + '</td></tr>').join('') + '</tbody></table>';
}

function failureFilters() {
  const q = new URLSearchParams(location.hash.split('?')[1] || '');
  return { kind: q.get('kind') || '', job: q.get('job') || '', node: q.get('node') || '', since: q.get('since') || '' };
}

async function renderFailures(main) {
  const f = failureFilters();
  const q = new URLSearchParams();
  if (f.kind) q.set('kind', f.kind);
  if (f.job) q.set('job', f.job);
  if (f.since) q.set('since', String(Date.now() / 1000 - Number(f.since) * 60));
  const { items } = await getAll('/v1/failures' + (q.toString() ? '?' + q : ''), 'failures');
  const shown = items.filter((x) => !f.node || (x.nodes || []).includes(f.node)).reverse();
  const form = document.getElementById('failure-filters');
  const html = '<div class="card"><h2>Failures: <span data-count="failures">' + shown.length + '</span></h2>' +
    (form ? '' : filterForm(f)) + failureTable(shown) + '</div>';
  if (form) {
    // Keep the form (and what the user is typing) across polls; replace the table only.
    main.querySelector('h2').innerHTML = 'Failures: <span data-count="failures">' + shown.length + '</span>';
    main.querySelector('table').outerHTML = failureTable(shown);
  } else {
    main.innerHTML = html;
  }
}

function filterForm(f) {
  return '<form id="failure-filters" class="filters"><label>kind<select name="kind"><option value="">any</option>' +
    FINDING_KINDS.map((k) => '<option' + (k === f.kind ? ' selected' : '') + '>' + k + '</option>').join('') +
    '</select></label><label>job<input name="job" size="10" value="' + esc(f.job) + '"></label>' +
    '<label>node<input name="node" size="10" value="' + esc(f.node) + '"></label>' +
    '<label>in the last (minutes)<input name="since" size="6" value="' + esc(f.since) + '"></label>' +
    '<button type="submit">Filter</button></form>';
}

// ---- navigation, polling, actions ----

function route() {
  const h = location.hash.replace(/^#\/?/, '');
  const path = h.split('?')[0];
  if (path.startsWith('job/')) return { view: 'job', id: decodeURIComponent(path.slice(4)) };
  if (path === 'jobs' || path === 'failures') return { view: path };
  return { view: 'fleet' };
}

async function render() {
  const gen = ++state.generation;
  clearTimeout(state.timer);
  const main = document.getElementById('main');
  const r = route();
  for (const a of document.querySelectorAll('nav a'))
    a.classList.toggle('active', a.dataset.view === r.view || (r.view === 'job' && a.dataset.view === 'jobs'));
  try {
    if (!state.who) await loadWho();
    const scratch = document.createElement('div');
    const target = r.view === 'failures' && main.dataset.view === 'failures' ? main : scratch;
    if (r.view === 'fleet') await renderFleet(target);
    else if (r.view === 'jobs') await renderJobs(target);
    else if (r.view === 'job') await renderJob(target, r.id);
    else await renderFailures(target);
    if (gen !== state.generation) return;
    if (target === scratch) {
      main.replaceChildren(...scratch.childNodes);
      main.dataset.view = r.view;
    }
    showError(null);
    document.getElementById('updated').textContent = 'updated ' + new Date().toLocaleTimeString();
  } catch (e) {
    if (gen !== state.generation) return;
    if (!(e instanceof ApiError)) console.warn(e);
    showError(e instanceof ApiError ? e : new ApiError(0, 'the page failed: ' + e.message));
    if (!main.dataset.view) main.innerHTML = '<p class="muted">Nothing to show until the daemon answers.</p>';
  }
  state.timer = setTimeout(render, POLL_MS);
}

async function act(button) {
  const id = button.dataset.id;
  const action = button.dataset.action;
  const reasonBox = document.getElementById('node-reason');
  const reason = reasonBox && reasonBox.value ? reasonBox.value : 'from the dashboard';
  try {
    if (action === 'cordon') await api('PATCH', '/v1/nodes/' + encodeURIComponent(id), { schedulable: false, reason });
    else if (action === 'uncordon') await api('PATCH', '/v1/nodes/' + encodeURIComponent(id), { schedulable: true, reason });
    else if (action === 'cancel') {
      if (!confirm('Cancel job ' + id + '?')) return;
      await api('POST', '/v1/jobs/' + encodeURIComponent(id) + '/cancel', {});
    } else if (action === 'restart') {
      await api('POST', '/v1/jobs/' + encodeURIComponent(id) + '/restart', { from: 'last-known-good' });
    }
    render();
  } catch (e) {
    showError(e);
  }
}

function start() {
  document.getElementById('token-button').addEventListener('click', () => askToken(''));
  document.getElementById('token-form').addEventListener('submit', (ev) => {
    ev.preventDefault();
    state.token = document.getElementById('token-input').value.trim();
    sessionStorage.setItem(TOKEN_KEY, state.token);
    document.getElementById('token-input').value = '';
    document.getElementById('token-form').classList.add('hidden');
    state.who = null;
    render();
  });
  document.getElementById('token-clear').addEventListener('click', () => {
    sessionStorage.removeItem(TOKEN_KEY);
    state.token = '';
    state.who = null;
    render();
  });
  document.getElementById('main').addEventListener('click', (ev) => {
    const node = ev.target.closest('[data-node]');
    if (node) {
      state.selectedNode = node.dataset.node;
      for (const b of document.querySelectorAll('.node.selected')) b.classList.remove('selected');
      node.classList.add('selected');
      document.getElementById('node-detail').innerHTML = '<p class="muted">Loading ' + esc(node.dataset.node) + '…</p>';
      render();
      return;
    }
    const button = ev.target.closest('button[data-action]');
    if (button) act(button);
  });
  document.getElementById('main').addEventListener('submit', (ev) => {
    if (ev.target.id !== 'failure-filters') return;
    ev.preventDefault();
    const q = new URLSearchParams();
    for (const [k, v] of new FormData(ev.target)) if (v) q.set(k, v);
    delete document.getElementById('main').dataset.view;
    location.hash = '#/failures' + (q.toString() ? '?' + q : '');
  });
  window.addEventListener('hashchange', () => {
    delete document.getElementById('main').dataset.view;
    render();
  });
  render();
}

document.addEventListener('DOMContentLoaded', start);

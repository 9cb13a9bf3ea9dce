// strata console: reads /api/console (what is served: a broker, or an app
// with its topology) now and then, and /metrics every second (?every=MS),
// and draws the page from those readings. Every figure shown is a metric
// or the difference of one between two readings, so a scraper sees the
// same. No library, nothing fetched from elsewhere.
"use strict";

const params = new URLSearchParams(location.search);
// How often /metrics is read, in ms (?every=250 for a closer look).
const EVERY_MS = Math.max(100, Number(params.get("every")) || 1000);
// Readings kept: the trends and the rates are taken over them.
const KEPT = 120;
// Readings a rate spans (about 5 s at the default pace).
const RATE_SPAN = 5;

const readings = [];
let described = null;
let showInternal = false;
let failures = 0;
// Readings taken: /api/console is read again every 20.
let ticks = 0;
// Progress values the job's bar showed, kept for a test to read (the
// last 50).
const SEEN_KEPT = 50;

// ---- Prometheus text ----

// One scrape as a Map: family name -> [{labels, value}].
function parseMetrics(text) {
  const families = new Map();
  for (const line of text.split("\n")) {
    if (line === "" || line.startsWith("#")) continue;
    const brace = line.indexOf("{");
    const space = brace >= 0 ? line.indexOf(" ", line.lastIndexOf("}")) : line.indexOf(" ");
    if (space < 0) continue;
    const name = brace >= 0 ? line.slice(0, brace) : line.slice(0, space);
    const labels = brace >= 0 ? parseLabels(line.slice(brace + 1, line.lastIndexOf("}"))) : {};
    const value = Number(line.slice(space + 1).trim().split(" ")[0]);
    if (!families.has(name)) families.set(name, []);
    families.get(name).push({ labels, value });
  }
  return families;
}

// `a="x",b="y\"z"` -> {a: "x", b: "y\"z"}.
function parseLabels(text) {
  const labels = {};
  let i = 0;
  while (i < text.length) {
    const eq = text.indexOf("=", i);
    if (eq < 0) break;
    const key = text.slice(i, eq).replace(/^,/, "").trim();
    let j = eq + 2; // past ="
    let value = "";
    while (j < text.length && text[j] !== '"') {
      if (text[j] === "\\" && j + 1 < text.length) {
        const next = text[j + 1];
        value += next === "n" ? "\n" : next;
        j += 2;
      } else {
        value += text[j++];
      }
    }
    labels[key] = value;
    i = j + 1;
  }
  return labels;
}

// ---- readings ----

function latest() { return readings[readings.length - 1]; }

function samples(reading, name, where) {
  const all = (reading && reading.families.get(name)) || [];
  return where ? all.filter((s) => where(s.labels)) : all;
}

function sum(reading, name, where) {
  return samples(reading, name, where).reduce((total, s) => total + s.value, 0);
}

// Per second, over the last RATE_SPAN readings (null before two exist).
function rate(name, where) {
  if (readings.length < 2) return null;
  const from = readings[Math.max(0, readings.length - 1 - RATE_SPAN)];
  const to = latest();
  const seconds = (to.at - from.at) / 1000;
  if (seconds <= 0) return null;
  return Math.max(0, (sum(to, name, where) - sum(from, name, where)) / seconds);
}

// The kept history of a sum, oldest first.
function history(name, where) {
  return readings.map((r) => sum(r, name, where));
}

// ---- formatting ----

function esc(text) {
  return String(text).replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]);
}

function count(n) {
  if (n === null || n === undefined || Number.isNaN(n)) return "–";
  const a = Math.abs(n);
  if (a >= 1e9) return (n / 1e9).toFixed(2) + " G";
  if (a >= 1e6) return (n / 1e6).toFixed(2) + " M";
  if (a >= 1e4) return (n / 1e3).toFixed(1) + " k";
  return Number.isInteger(n) ? String(n) : n.toFixed(1);
}

function bytes(n) {
  if (n === null || n === undefined) return "–";
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
  return (i === 0 ? String(n) : n.toFixed(1)) + " " + units[i];
}

function duration(seconds) {
  if (seconds === null || seconds === undefined || !Number.isFinite(seconds)) return "–";
  if (seconds < 1) return (seconds * 1000).toFixed(0) + " ms";
  if (seconds < 120) return seconds.toFixed(1) + " s";
  if (seconds < 7200) return (seconds / 60).toFixed(1) + " min";
  return (seconds / 3600).toFixed(1) + " h";
}

function perSecond(n) { return n === null ? "–" : count(n) + "/s"; }

function sparkline(values, width = 120, height = 24) {
  if (values.length < 2) return `<svg class="spark" width="${width}" height="${height}"></svg>`;
  const max = Math.max(...values, 1);
  const step = width / (values.length - 1);
  const points = values
    .map((v, i) => `${(i * step).toFixed(1)},${(height - 2 - (v / max) * (height - 4)).toFixed(1)}`)
    .join(" ");
  return `<svg class="spark" width="${width}" height="${height}"><polyline points="${points}"/></svg>`;
}

function card(id, label, value) {
  return `<div class="card"><div class="value" id="${id}">${esc(value)}</div><div class="label">${esc(label)}</div></div>`;
}

function table(headers, rows) {
  const head = headers
    .map((h) => `<th class="${h.startsWith("#") ? "num" : ""}">${esc(h.replace(/^#/, ""))}</th>`)
    .join("");
  const numeric = headers.map((h) => h.startsWith("#"));
  const body = rows
    .map((row) => "<tr>" + row.map((cell, i) => `<td class="${numeric[i] ? "num" : ""}">${cell}</td>`).join("") + "</tr>")
    .join("");
  return `<table><thead><tr>${head}</tr></thead><tbody>${body}</tbody></table>`;
}

// Busy fraction 0..1 as a colour: green, yellow, red.
function busyColour(fraction) {
  const f = Math.min(1, Math.max(0, fraction || 0));
  return `hsl(${Math.round(120 - 120 * f)}, 62%, 78%)`;
}

// ---- the broker ----

function renderBroker() {
  const r = latest();
  const internal = (topic) => topic.startsWith("__") || topic.startsWith("_strata");
  const topics = new Map();
  for (const s of samples(r, "strata_log_end_offset")) {
    const t = s.labels.topic;
    if (!showInternal && internal(t)) continue;
    if (!topics.has(t)) topics.set(t, { partitions: 0 });
    topics.get(t).partitions++;
  }
  const byTopic = (topic) => (l) => l.topic === topic;
  const topicRows = [...topics.keys()].sort().map((t) => {
    // Its oldest partition's first batch: how far back the topic reaches.
    const firsts = samples(r, "strata_log_first_timestamp_seconds", byTopic(t)).map((s) => s.value);
    const reach = firsts.length ? Date.now() / 1000 - Math.min(...firsts) : null;
    return [
      esc(t),
      topics.get(t).partitions,
      count(sum(r, "strata_log_start_offset", byTopic(t))),
      count(sum(r, "strata_log_end_offset", byTopic(t))),
      bytes(sum(r, "strata_log_size_bytes", byTopic(t))),
      reach === null ? "–" : duration(Math.max(0, reach)),
      perSecond(rate("strata_log_end_offset", byTopic(t))),
    ];
  });
  const groups = new Map();
  for (const s of samples(r, "strata_group_lag")) {
    const key = s.labels.group + "\u0000" + s.labels.topic;
    if (!groups.has(key)) groups.set(key, { group: s.labels.group, topic: s.labels.topic });
  }
  const groupRows = [...groups.values()].map(({ group, topic }) => {
    const where = (l) => l.group === group && l.topic === topic;
    const lag = sum(r, "strata_group_lag", where);
    const seconds = samples(r, "strata_group_lag_seconds", where).reduce((m, s) => Math.max(m, s.value), 0);
    const consumed = rate("strata_group_committed_offset", where);
    const produced = rate("strata_log_end_offset", (l) => l.topic === topic);
    // Catching up at the difference of the two rates.
    const gaining = consumed !== null && produced !== null ? consumed - produced : null;
    const eta = lag === 0 ? 0 : gaining > 0 ? lag / gaining : null;
    return [esc(group), esc(topic), count(lag), duration(seconds), sparkline(history("strata_group_lag", where)), perSecond(consumed), lag === 0 ? "caught up" : duration(eta)];
  });
  const requestRate = rate("strata_requests_total");
  document.getElementById("main").innerHTML =
    `<div class="cards">` +
    card("requests-rate", "requests", perSecond(requestRate)) +
    card("bytes-in-rate", "bytes in", rate("strata_bytes_in_total") === null ? "–" : bytes(rate("strata_bytes_in_total")) + "/s") +
    card("bytes-out-rate", "bytes out", rate("strata_bytes_out_total") === null ? "–" : bytes(rate("strata_bytes_out_total")) + "/s") +
    card("transactions-ongoing", "transactions in flight", count(sum(r, "strata_transactions_ongoing"))) +
    card("denied", "refused by ACLs", count(sum(r, "strata_authorization_denied_total"))) +
    card("fetches-waiting", "fetches waiting", count(sum(r, "strata_fetches_waiting"))) +
    `</div>` +
    `<h2>Topics <label class="toggle"><input type="checkbox" id="internal" ${showInternal ? "checked" : ""}> internal topics</label></h2>` +
    `<div id="topics">` +
    (topicRows.length ? table(["topic", "#partitions", "#first offset", "#end offset", "#size", "#reaches back", "#records in"], topicRows) : `<p class="muted">No topic yet.</p>`) +
    `</div>` +
    `<h2>Consumer groups</h2>` +
    `<div id="groups">` +
    (groupRows.length
      ? table(["group", "topic", "#lag", "#lag (time)", "lag trend", "#committing", "#caught up in"], groupRows)
      : `<p class="muted">No group has committed an offset yet.</p>`) +
    `</div>`;
  document.getElementById("internal").addEventListener("change", (e) => {
    showInternal = e.target.checked;
    renderBroker();
  });
}

// ---- an app ----

// Each processor's place in a left-to-right layout: a topic read from
// outside the app in column 0, a processor one right of the furthest
// topic it reads, a topic it writes one right of it.
function layout(processors) {
  const column = new Map();
  const written = new Set(processors.flatMap((p) => p.outputs));
  for (const p of processors) for (const t of p.inputs) if (!written.has(t)) column.set("t:" + t, 0);
  // Columns only grow, and never past twice the processors: a cycle of
  // derived topics stops there instead of pushing the graph right forever.
  const last = 2 * processors.length;
  for (let pass = 0; pass < processors.length + 1; pass++) {
    for (const p of processors) {
      const from = Math.min(last - 1, Math.max(0, ...p.inputs.map((t) => column.get("t:" + t) ?? 0)));
      column.set("p:" + p.name, from + 1);
      for (const t of p.outputs) column.set("t:" + t, Math.min(last, Math.max(column.get("t:" + t) ?? 0, from + 2)));
    }
  }
  return column;
}

function topologySvg(processors) {
  if (!processors.length) return `<p class="muted">No processor.</p>`;
  const r = latest();
  const column = layout(processors);
  const rows = new Map();
  const place = new Map();
  const W = 170, H = 46, GAP_X = 80, GAP_Y = 34, PAD = 20;
  for (const [id, c] of [...column.entries()].sort()) {
    const row = rows.get(c) ?? 0;
    rows.set(c, row + 1);
    place.set(id, { x: PAD + c * (W + GAP_X), y: PAD + row * (H + GAP_Y + 30) });
  }
  const columns = Math.max(...column.values()) + 1;
  const height = PAD * 2 + Math.max(...rows.values()) * (H + GAP_Y + 30);
  const width = PAD * 2 + columns * (W + GAP_X) - GAP_X;
  let edges = "", nodes = "";
  const edge = (from, to, label) => {
    const a = place.get(from), b = place.get(to);
    const x1 = a.x + W, y1 = a.y + H / 2, x2 = b.x, y2 = b.y + H / 2, mx = (x1 + x2) / 2;
    edges += `<path class="edge" marker-end="url(#arrow)" d="M${x1},${y1} C${mx},${y1} ${mx},${y2} ${x2},${y2}"/>`;
    edges += `<text class="edge-label" data-edge="${esc(from + ">" + to)}" x="${mx}" y="${(y1 + y2) / 2 - 6}" text-anchor="middle">${esc(label)}</text>`;
  };
  for (const p of processors) {
    const mine = (l) => l.processor === p.name;
    for (const t of p.inputs) {
      edge("t:" + t, "p:" + p.name, perSecond(rate("strata_task_records_consumed_total", (l) => mine(l) && l.topic === t)));
    }
    for (const t of p.outputs) {
      edge("p:" + p.name, "t:" + t, perSecond(rate("strata_task_records_produced_total", (l) => mine(l) && l.topic === t)));
    }
  }
  for (const [id, at] of place) {
    const [kind, name] = [id.slice(0, 1), id.slice(2)];
    if (kind === "t") {
      const end = sum(r, "strata_task_records_lag", (l) => l.topic === name);
      nodes += `<g class="node" data-kind="topic" data-name="${esc(name)}"><rect x="${at.x}" y="${at.y}" width="${W}" height="${H}" rx="${H / 2}" fill="var(--topic)" stroke="#9db8d6"/>` +
        `<text x="${at.x + W / 2}" y="${at.y + 20}" text-anchor="middle">${esc(name)}</text>` +
        `<text class="node-detail" x="${at.x + W / 2}" y="${at.y + 36}" text-anchor="middle">topic · lag ${count(end)}</text></g>`;
      continue;
    }
    const p = processors.find((q) => q.name === name);
    const mine = (l) => l.processor === name;
    // The busiest task's share of wall time spent processing.
    const tasks = new Set(samples(r, "strata_task_process_seconds_total", mine).map((s) => s.labels.task));
    let busy = 0;
    for (const task of tasks) busy = Math.max(busy, rate("strata_task_process_seconds_total", (l) => l.task === task) ?? 0);
    nodes += `<g class="node" data-kind="processor" data-name="${esc(name)}" data-busy="${busy.toFixed(3)}"><rect x="${at.x}" y="${at.y}" width="${W}" height="${H}" rx="4" fill="${busyColour(busy)}" stroke="#7d8793"/>` +
      `<text x="${at.x + W / 2}" y="${at.y + 20}" text-anchor="middle" font-weight="600">${esc(name)}</text>` +
      `<text class="node-detail" x="${at.x + W / 2}" y="${at.y + 36}" text-anchor="middle">${tasks.size} task${tasks.size === 1 ? "" : "s"} · busy ${(busy * 100).toFixed(0)}%</text></g>`;
    // The processor's stores share its tasks' state: one box, their names
    // and the state's size.
    if (p.stores.length) {
      const x = at.x + 10, y = at.y + H + 10;
      const names = p.stores.length === 1 ? "store " + p.stores[0] : "stores " + p.stores.join(", ");
      nodes += `<g class="node" data-kind="store" data-name="${esc(p.stores.join(","))}"><rect x="${x}" y="${y}" width="${W - 20}" height="24" rx="3" fill="var(--store)" stroke="#b4a6cf"/>` +
        `<text class="node-detail" x="${x + (W - 20) / 2}" y="${y + 16}" text-anchor="middle">${esc(names)} · ${bytes(sum(r, "strata_task_state_bytes", mine))}</text></g>`;
    }
  }
  return `<svg id="topology" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}">` +
    `<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="#8a94a0"/></marker></defs>` +
    edges + nodes + `</svg>`;
}

function taskRows() {
  const r = latest();
  const states = samples(r, "strata_task_state");
  return states
    .map((s) => s.labels)
    .sort((a, b) => a.task.localeCompare(b.task, undefined, { numeric: true }))
    .map(({ task, state }) => {
      const mine = (l) => l.task === task;
      if (state === "standby") {
        return [esc(task), "standby", "–", "–", count(sum(r, "strata_standby_lag_offsets", mine)) + " offsets", "–", "–"];
      }
      if (state === "restoring") {
        const left = sum(r, "strata_restore_offsets_remaining", mine);
        return [esc(task), "restoring", "–", "–", count(left) + " to restore", "–", "–"];
      }
      const seconds = samples(r, "strata_task_lag_seconds", mine).reduce((m, x) => Math.max(m, x.value), 0);
      const eta = samples(r, "strata_task_catch_up_seconds", mine)[0];
      const speed = rate("strata_task_records_consumed_total", mine);
      return [
        esc(task),
        "running",
        perSecond(speed),
        skew(task, speed),
        count(sum(r, "strata_task_records_lag", mine)),
        duration(seconds),
        eta ? duration(eta.value) : "–",
      ];
    });
}

// Tasks that will not catch up before retention may delete what they
// have not read yet, each with how long that leaves.
function retentionWarning() {
  const r = latest();
  const risky = samples(r, "strata_task_retention_at_risk").filter((s) => s.value > 0);
  if (!risky.length) return "";
  const lines = risky.map((s) => {
    const mine = (l) => l.task === s.labels.task;
    const left = samples(r, "strata_task_retention_expiry_seconds", mine).reduce((m, x) => Math.min(m, x.value), Infinity);
    const eta = samples(r, "strata_task_catch_up_seconds", mine)[0];
    return `<li>task <b>${esc(s.labels.task)}</b> needs ${eta ? duration(eta.value) : "–"} to catch up; retention may delete its unread records ${left <= 0 ? "now" : "in " + duration(left)}</li>`;
  });
  return `<div class="warning" id="retention-warning"><b>Records will be lost:</b><ul>${lines.join("")}</ul>Raise the input topics' retention.ms, or make the app faster.</div>`;
}

// A task's rate against the mean of its processor's tasks (partition
// skew: 2× reads twice its share).
function skew(task, speed) {
  const processor = task.slice(0, task.lastIndexOf("/"));
  const rates = samples(latest(), "strata_task_state", (l) => l.state === "running" && l.task.startsWith(processor + "/"))
    .map((s) => rate("strata_task_records_consumed_total", (l) => l.task === s.labels.task) ?? 0);
  const mean = rates.reduce((a, b) => a + b, 0) / Math.max(1, rates.length);
  return speed === null || mean <= 0 ? "–" : (speed / mean).toFixed(2) + "×";
}

// The job's progress: against its targets when its tasks know them (a
// rebuild, a run to the inputs' end), else records processed against
// those still to read, over every running task.
function jobProgress() {
  const r = latest();
  const total = sum(r, "strata_job_records_target");
  if (total > 0) {
    const done = Math.min(total, sum(r, "strata_job_records_done"));
    const left = total - done;
    const speed = rate("strata_job_records_done");
    return { done, left, fraction: done / total, eta: left === 0 ? 0 : speed > 0 ? left / speed : null };
  }
  const done = sum(r, "strata_task_records_consumed_total");
  const left = sum(r, "strata_task_records_lag");
  const fraction = done + left === 0 ? 0 : done / (done + left);
  const speed = rate("strata_task_records_consumed_total");
  return { done, left, fraction, eta: left === 0 ? 0 : speed > 0 ? left / speed : null };
}

// A replay's running diff against the live version: per store, the keys
// that differ; per derived partition, the records that differ as far as
// both versions reach, and where they first do.
function diffSection() {
  if (described.job !== "replay") return "";
  const r = latest();
  const taken = samples(r, "strata_replay_diff_timestamp_seconds")[0];
  if (!taken) return `<h2>Diff against live</h2><p class="muted" id="diff">The first diff is being taken.</p>`;
  const age = Math.max(0, Date.now() / 1000 - taken.value);
  const took = sum(r, "strata_replay_diff_duration_seconds");
  const keys = (store, kind) => sum(r, "strata_replay_diff_store_keys", (l) => l.store === store && l.kind === kind);
  const stores = [...new Set(samples(r, "strata_replay_diff_store_keys").map((s) => s.labels.store))];
  const storeRows = stores.map((store) => [esc(store), count(keys(store, "different")), count(keys(store, "only_replay")), count(keys(store, "only_live"))]);
  const topicRows = samples(r, "strata_replay_diff_topic_differing_records").map((s) => {
    const mine = (l) => l.topic === s.labels.topic && l.partition === s.labels.partition;
    const records = (side) => sum(r, "strata_replay_diff_topic_records", (l) => mine(l) && l.side === side);
    const first = samples(r, "strata_replay_diff_first_difference_offset", mine)[0];
    return [esc(s.labels.topic), esc(s.labels.partition), count(records("replay")), count(records("live")), count(s.value), first ? String(first.value) : "–"];
  });
  const differs = storeRows.some((row) => row[1] !== "0" || row[2] !== "0") || topicRows.some((row) => row[4] !== "0");
  return (
    `<h2>Diff against live</h2>` +
    `<div class="legend" id="diff" data-differs="${differs}">${differs ? "<b>differs</b>" : "the same so far"} · taken ${duration(age)} ago in ${duration(took)}; keys only in live may not be reached yet</div>` +
    (storeRows.length ? `<div id="diff-stores">` + table(["store", "#different values", "#only in the replay", "#only in live"], storeRows) + `</div>` : "") +
    (topicRows.length ? `<div id="diff-topics">` + table(["derived topic", "#partition", "#records replayed", "#records live", "#differing", "#first difference at"], topicRows) + `</div>` : "")
  );
}

function renderApp() {
  const r = latest();
  const d = described;
  const lag = sum(r, "strata_task_records_lag");
  const job = jobProgress();
  const restores = samples(r, "strata_restore_offsets_remaining");
  const hot = samples(r, "strata_task_hot_key_records")
    .map((s) => ({ ...s, how: "read" }))
    .concat(samples(r, "strata_task_hot_written_key_records").map((s) => ({ ...s, how: `written to ${s.labels.store}` })))
    .sort((a, b) => b.value - a.value)
    .slice(0, 12)
    .map((s) => [esc(s.labels.key), esc(s.how), esc(s.labels.task), count(s.value)]);
  const jobName = d.job === "run" ? "live run" : `${d.job} of version ${d.version}`;
  const progress = document.getElementById("job-progress");
  const seen = progress ? progress.dataset.seen : "";
  const percent = (job.fraction * 100).toFixed(1);
  const values = seen ? seen.split(",") : [];
  if (values[values.length - 1] !== percent) values.push(percent);
  const seenNow = values.slice(-SEEN_KEPT).join(",");
  const restoreRows = restores.map((s) => {
    const mine = (l) => l.task === s.labels.task;
    const put = sum(r, "strata_restore_records", mine);
    const speed = rate("strata_restore_records", mine);
    return [
      esc(s.labels.task),
      `<progress max="1" value="${put / Math.max(1, put + s.value)}"></progress>`,
      count(put),
      count(s.value),
      perSecond(speed),
      speed > 0 ? duration(s.value / speed) : "–",
    ];
  });
  // Dropped records by processor and reason.
  const reasons = new Map();
  for (const s of samples(r, "strata_task_dropped_records_total")) {
    const key = s.labels.processor + "\u0000" + s.labels.reason;
    reasons.set(key, { processor: s.labels.processor, reason: s.labels.reason });
  }
  // Records the processors failed on, by kind and what their error
  // policy did with them (skipped, or sent to a dead-letter topic).
  const failures = new Map();
  for (const s of samples(r, "strata_task_failed_records_total")) {
    failures.set([s.labels.processor, s.labels.kind, s.labels.action].join("\u0000"), s.labels);
  }
  const failed = [...failures.values()].map(({ processor, kind, action }) => {
    const where = (l) => l.processor === processor && l.kind === kind && l.action === action;
    return [esc(processor), esc(kind), esc(action.replace("_", " ")), count(sum(r, "strata_task_failed_records_total", where)), perSecond(rate("strata_task_failed_records_total", where))];
  });
  const dropped = [...reasons.values()].map(({ processor, reason }) => {
    const where = (l) => l.processor === processor && l.reason === reason;
    return [esc(processor), esc(reason), count(sum(r, "strata_task_dropped_records_total", where)), perSecond(rate("strata_task_dropped_records_total", where))];
  });
  document.getElementById("main").innerHTML =
    `<div class="cards">` +
    card("records-rate", "records processed", perSecond(rate("strata_records_processed_total"))) +
    card("lag-total", "records behind", String(lag)) +
    card("lag-time", "behind in time", duration(samples(r, "strata_task_lag_seconds").reduce((m, s) => Math.max(m, s.value), 0))) +
    card("tasks-running", "tasks running", count(samples(r, "strata_task_state", (l) => l.state === "running").length)) +
    card("standbys", "standby copies", count(samples(r, "strata_task_state", (l) => l.state === "standby").length)) +
    card("state-bytes", "state on disk", bytes(sum(r, "strata_task_state_bytes"))) +
    card("dropped", "records dropped", count(sum(r, "strata_task_dropped_records_total"))) +
    `</div>` +
    retentionWarning() +
    `<div class="legend">lag trend ${sparkline(history("strata_task_records_lag"), 240, 28)}</div>` +
    `<h2>Jobs</h2>` +
    table(["job", "progress", "#processed", "#left", "#done in"], [[
      esc(jobName),
      `<progress id="job-progress" max="1" value="${job.fraction}" data-seen="${seenNow}"></progress> <span id="job-percent">${percent}%</span>`,
      count(job.done),
      count(job.left),
      job.left === 0 ? "caught up" : duration(job.eta),
    ]]) +
    diffSection() +
    (restoreRows.length ? `<h2>Restores</h2>` + table(["task", "progress", "#records put back", "#offsets left", "#records/s", "#done in"], restoreRows) : "") +
    `<h2>Topology</h2>` +
    `<div class="legend">processors coloured by their busiest task's time processing: <span class="swatch" style="background:${busyColour(0)}"></span>idle <span class="swatch" style="background:${busyColour(0.5)}"></span>half <span class="swatch" style="background:${busyColour(1)}"></span>busy; edges carry records per second</div>` +
    `<div class="graph">${topologySvg(d.processors)}</div>` +
    `<h2>Tasks</h2>` +
    table(["task", "state", "#records/s", "#against the mean", "#lag", "#lag (time)", "#caught up in"], taskRows()) +
    (dropped.length ? `<h2>Dropped records</h2>` + table(["processor", "reason", "#records", "#per second"], dropped) : "") +
    (failed.length ? `<h2>Failed records</h2><div id="failed">` + table(["processor", "kind", "what was done", "#records", "#per second"], failed) + `</div>` : "") +
    `<h2>Hot keys</h2>` +
    (hot.length ? table(["key", "how", "task", "#records (estimated)"], hot) : `<p class="muted">No key counted yet.</p>`) +
    `<h2>Stores</h2>` +
    `<div id="stores"></div>`;
  renderStores();
}

// A Rust type's name without its module paths: `String`, not
// `alloc::string::String`.
function typeName(name) {
  return String(name).replace(/\b[a-z_][a-z0-9_]*::/g, "");
}

// The store lookup keeps what was typed and answered across redraws.
const lookup = { store: null, key: "", answer: "" };

function renderStores() {
  const stores = Object.entries(described.stores || {});
  const box = document.getElementById("stores");
  if (described.lookup === false) {
    box.innerHTML = `<p class="muted">Its state is not in use until the rebuild swaps it in: look keys up in the app's own console.</p>`;
    return;
  }
  if (!stores.length) {
    box.innerHTML = `<p class="muted">This app keeps no store.</p>`;
    return;
  }
  if (lookup.store === null) lookup.store = stores[0][0];
  const options = stores
    .map(([name, s]) => `<option value="${esc(name)}" ${name === lookup.store ? "selected" : ""}>${esc(name)} (${esc(s.processor)}: ${esc(typeName(s.key_type))} → ${esc(typeName(s.value_type))})</option>`)
    .join("");
  box.innerHTML =
    `<form class="lookup" id="lookup"><select id="lookup-store">${options}</select>` +
    `<input id="lookup-key" placeholder="key" value="${esc(lookup.key)}" autocomplete="off">` +
    `<button id="lookup-go" type="submit">Look up</button></form>` +
    `<pre class="answer" id="lookup-result">${esc(lookup.answer)}</pre>`;
  const form = document.getElementById("lookup");
  document.getElementById("lookup-store").addEventListener("change", (e) => { lookup.store = e.target.value; });
  document.getElementById("lookup-key").addEventListener("input", (e) => { lookup.key = e.target.value; });
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    const path = `/stores/${encodeURIComponent(lookup.store)}/keys/${encodeURIComponent(lookup.key)}`;
    try {
      const answer = await fetch(path);
      lookup.answer = `${answer.status} ${answer.statusText}\n` + JSON.stringify(await answer.json(), null, 2);
    } catch (error) {
      lookup.answer = `the lookup failed: ${error}`;
    }
    document.getElementById("lookup-result").textContent = lookup.answer;
  });
}

// ---- the loop ----

// Redraws wait while someone is typing a key, so the field keeps focus.
function typing() {
  const active = document.activeElement;
  return active && (active.id === "lookup-key" || active.id === "lookup-store");
}

async function tick() {
  try {
    if (described === null || ticks % 20 === 0) {
      const answer = await fetch("/api/console");
      if (!answer.ok) throw new Error(`/api/console answered ${answer.status}`);
      described = await answer.json();
      document.getElementById("title").textContent =
        described.kind === "broker" ? "broker" : `${described.name} · ${described.job === "run" ? "live (version " + described.version + ")" : described.job + " of version " + described.version}`;
    }
    const answer = await fetch("/metrics");
    if (!answer.ok) throw new Error(`/metrics answered ${answer.status}`);
    readings.push({ at: Date.now(), families: parseMetrics(await answer.text()) });
    ticks++;
    if (readings.length > KEPT) readings.shift();
    failures = 0;
    const status = document.getElementById("status");
    status.className = "status";
    status.textContent = "read " + new Date().toLocaleTimeString();
    if (described.kind === "broker") renderBroker();
    else if (typing()) {
      // Only the figures the test and the eye watch most.
      document.getElementById("lag-total").textContent = String(sum(latest(), "strata_task_records_lag"));
    } else renderApp();
  } catch (error) {
    failures++;
    const status = document.getElementById("status");
    status.className = "status error";
    status.textContent = `cannot read this endpoint (${failures}×): ${error.message}`;
  }
  setTimeout(tick, EVERY_MS);
}

tick();

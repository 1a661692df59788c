// unit serve's page: polls /api/status every second (and /api/list for models and PRs), and
// renders every value with textContent: records are untrusted input, never markup.
"use strict";

const WAITING = ["waiting-on-lead", "stuck", "failed", "rate-limited", "recovery"];
const STATUS_EVERY_MS = 1000;
const LIST_EVERY_MS = 5000;
const DETAIL_EVERY_MS = 2000;

const CHECKS_EVERY_MS = 30000;
const state = { status: null, list: null, checks: null, selected: null, detail: null, copied: null };

function el(tag, attributes, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (name === "class") node.className = value;
    else if (name === "text") node.textContent = String(value);
    else node.setAttribute(name, String(value));
  }
  for (const child of children) {
    if (child === null || child === undefined) continue;
    node.append(typeof child === "string" ? document.createTextNode(child) : child);
  }
  return node;
}

function ago(iso) {
  if (!iso) return null;
  const then = Date.parse(iso);
  if (Number.isNaN(then)) return null;
  let seconds = Math.max(0, Math.round((Date.now() - then) / 1000));
  if (seconds < 5) return "just now";
  if (seconds < 60) return `${seconds}s ago`;
  let minutes = Math.floor(seconds / 60);
  if (minutes < 60) return `${minutes}m ago`;
  const hours = Math.floor(minutes / 60);
  minutes %= 60;
  if (hours < 24) return minutes ? `${hours}h ${minutes}m ago` : `${hours}h ago`;
  seconds = Math.floor(hours / 24);
  return `${seconds}d ago`;
}

function since(iso) {
  const text = ago(iso);
  return text ? text.replace(/ ago$/, "").replace("just now", "a moment") : null;
}

function size(bytes) {
  if (bytes === null || bytes === undefined) return "";
  if (bytes < 1024) return `${bytes} B`;
  if (bytes < 1024 * 1024) return `${(bytes / 1024).toFixed(1)} KiB`;
  return `${(bytes / 1024 / 1024).toFixed(1)} MiB`;
}

// `attention {state, since, why}` is status --all's (SPEC 3.4): the page only shows it.
function attentionOf(unit) {
  return unit.attention && unit.attention.state ? unit.attention : { state: "idle", since: null, why: "" };
}

function listEntry(unitId) {
  const units = (state.list && state.list.units) || [];
  return units.find((unit) => unit.unit_id === unitId) || null;
}

function modelOf(unitId) {
  const entry = listEntry(unitId);
  const current = entry && entry.staffing && entry.staffing.current;
  return current ? current.model : null;
}

function pullsOf(unitId) {
  const entry = listEntry(unitId);
  const observed = entry && entry.observed;
  return observed && "pull_requests" in observed ? observed.pull_requests : undefined;
}

async function copyText(text, button) {
  let copied = false;
  try {
    await navigator.clipboard.writeText(text);
    copied = true;
  } catch (_refused) {
    // Not a secure context, or no permission: the old way, through a selected textarea.
    const area = el("textarea", { class: "offscreen" });
    area.value = text;
    document.body.append(area);
    area.select();
    try { copied = document.execCommand("copy"); } catch (_ignored) { copied = false; }
    area.remove();
  }
  // Rows are redrawn every second: the feedback lives in the state, not in this button.
  state.copied = { text, label: copied ? "copied" : "select and copy", until: Date.now() + 1500 };
  render();
}

function copyButton(text) {
  const recent = state.copied && state.copied.text === text && Date.now() < state.copied.until;
  const button = el("button", { type: "button", class: recent && state.copied.label === "copied" ? "copy copied" : "copy",
    title: "copy the command", text: recent ? state.copied.label : "copy" });
  button.addEventListener("click", (event) => {
    event.stopPropagation();
    copyText(text, button);
  });
  return button;
}

function renderBanner(units) {
  const banner = document.getElementById("banner");
  const waiting = units
    .map((unit) => ({ unit, attention: attentionOf(unit) }))
    .filter((item) => WAITING.includes(item.attention.state));
  banner.replaceChildren();
  // A tab in the background still says how many units wait.
  document.title = waiting.length ? `(${waiting.length}) unitmgr dashboard` : "unitmgr dashboard";
  if (!waiting.length) {
    banner.dataset.state = "quiet";
    banner.append(units.length ? "All quiet — nothing waits on you." : "All quiet — no units.");
    return;
  }
  banner.dataset.state = "waiting";
  banner.append(el("h2", { text: `Waiting on you: ${waiting.length} unit${waiting.length > 1 ? "s" : ""}` }));
  const list = el("ul");
  for (const { unit, attention } of waiting) {
    const age = since(attention.since);
    list.append(el("li", { "data-unit": unit.unit_id },
      el("span", { class: "unit-id", text: unit.unit_id }),
      el("span", { class: "pill", "data-state": attention.state, text: attention.state }),
      age ? el("span", { class: "sub", text: `for ${age}` }) : null,
      el("span", { class: "why", text: attention.why || "" })));
  }
  banner.append(list);
}

function portsOf(unit) {
  // The unit's leased ports (SPEC 3.19), as numbers only: the record is untrusted input.
  const ports = Array.isArray(unit.ports) ? unit.ports.filter((port) => Number.isInteger(port)) : [];
  return ports.length ? ports.join(" ") : "";
}

function turnCell(pair) {
  if (!pair || pair.error) return el("td", { class: "turn" }, el("span", { class: "sub", text: pair ? pair.error : "no pair" }));
  const turn = pair.turn || {};
  const output = ago(turn.last_output_at);
  let head;
  if (pair.in_flight) head = `#${pair.in_flight.seq} ${turn.kind || ""} running`;
  else if (pair.latest_receipt) head = `#${pair.latest_receipt.seq} ${pair.latest_receipt.kind || ""} ${pair.latest_receipt.status}`;
  else head = "no turn yet";
  return el("td", { class: "turn" }, el("div", { text: head }),
    output ? el("div", { class: "sub", text: `output ${output} · ${size(turn.bytes)}` }) : null);
}

function worktreeCell(unit) {
  const worktree = unit.worktree || {};
  if (unit.lifecycle === "unreadable") return el("td", { class: "sub", text: "-" });
  if (!worktree.present) return el("td", { class: "worktree" }, el("span", { class: "pill", "data-state": "failed", text: "missing" }));
  const dirty = worktree.dirty_files;
  return el("td", { class: "worktree", title: (worktree.dirty_sample || []).join("\n") || null },
    el("div", { text: dirty ? `${dirty} dirty file${dirty > 1 ? "s" : ""}` : "clean" }));
}

function branchCell(unit) {
  const worktree = unit.worktree || {};
  const counts = worktree.present && worktree.ahead_of_base !== null && worktree.ahead_of_base !== undefined
    ? `+${worktree.ahead_of_base} −${worktree.behind_base}` : null;
  return el("td", { class: "branch" }, el("div", { text: unit.branch || "-" }),
    el("div", { class: "sub", text: `on ${unit.base || "?"}${counts ? " · " + counts : ""}` }));
}

function pullCell(unitId) {
  const pulls = pullsOf(unitId);
  const cell = el("td", { class: "pr-column" });
  if (pulls === undefined) return cell;
  if (!Array.isArray(pulls)) { cell.append(el("span", { class: "sub", text: pulls.error || "unreadable" })); return cell; }
  if (!pulls.length) { cell.append(el("span", { class: "sub", text: "no PR" })); return cell; }
  const checks = (state.checks && state.checks.units && state.checks.units[unitId]) || [];
  for (const pull of pulls) {
    const label = `#${pull.number} ${pull.merged_at ? "merged" : pull.state}${pull.draft ? " draft" : ""}`;
    cell.append(el("div", {}, el("a", { href: pull.url, rel: "noreferrer", target: "_blank", text: label })));
    const found = checks.find((item) => item.number === pull.number);
    if (found && found.error) cell.append(el("div", { class: "sub", text: `checks: ${found.error}` }));
    else if (found) {
      const parts = [[found.passing, "passing"], [found.pending, "pending"], [found.failing, "failing"]]
        .filter(([labels]) => labels.length).map(([labels, word]) => `${labels.length} ${word}`);
      cell.append(el("div", { class: "checks", "data-failing": found.failing.length,
        title: [...found.failing, ...found.pending, ...found.passing].join("\n"),
        text: parts.length ? `checks: ${parts.join(", ")}` : "no checks" }));
    }
  }
  return cell;
}

function recoveryCell(unit) {
  const recovery = unit.recovery || {};
  const cell = el("td", { class: "recovery" });
  if (!recovery.needed) { cell.append(el("span", { class: "sub", text: "—" })); return cell; }
  cell.append(el("div", { class: "sub", text: recovery.why || "" }));
  if (recovery.command) cell.append(el("code", { text: recovery.command }), copyButton(recovery.command));
  return cell;
}

// Where a unit on another machine runs (SPEC 4.3), from status --all's `runner`: files only.
function runnerOf(unit) {
  const runner = unit.runner;
  if (!runner || !runner.kind) return null;
  const beat = runner.heartbeat_at ? ` · heartbeat ${since(runner.heartbeat_at) || "now"} ago` : "";
  return `on ${runner.kind} ${runner.node || "any node"}${beat}`;
}

function renderUnits(units) {
  const body = document.querySelector("#units tbody");
  const showPulls = units.some((unit) => pullsOf(unit.unit_id) !== undefined);
  for (const header of document.querySelectorAll(".pr-column")) header.hidden = !showPulls;
  const rows = units.map((unit) => {
    const attention = attentionOf(unit);
    const age = since(attention.since);
    const model = modelOf(unit.unit_id);
    const row = el("tr", { "data-unit": unit.unit_id, "data-attention": attention.state, class: unit.unit_id === state.selected ? "selected" : null },
      el("td", {}, el("div", { class: "unit-id", text: unit.unit_id }), unit.issue ? el("div", { class: "sub", text: `issue #${unit.issue}` }) : null,
        portsOf(unit) ? el("div", { class: "sub ports", text: `ports ${portsOf(unit)}` }) : null),
      el("td", { class: "attention" }, el("span", { class: "pill", "data-state": attention.state, text: attention.state }),
        age ? el("div", { class: "sub", text: `for ${age}` }) : null,
        attention.why ? el("div", { class: "sub", text: attention.why }) : null,
        unit.feedback ? el("div", { class: "sub feedback", text: unit.feedback }) : null),
      el("td", { class: "lifecycle", text: unit.lifecycle || "-" }),
      el("td", { class: "partner" }, el("div", { text: unit.partner || "-" }),
        model ? el("div", { class: "sub", title: model, text: model.length > 48 ? model.slice(0, 47) + "…" : model }) : null,
        runnerOf(unit) ? el("div", { class: "sub runner", text: runnerOf(unit) }) : null),
      turnCell(unit.pair),
      branchCell(unit),
      worktreeCell(unit));
    const pulls = pullCell(unit.unit_id);
    pulls.hidden = !showPulls;
    row.append(pulls, recoveryCell(unit));
    row.addEventListener("click", () => openDetail(unit.unit_id));
    return row;
  });
  body.replaceChildren(...rows);
  document.getElementById("empty").hidden = units.length > 0;
}

function renderOverlaps(overlaps) {
  const section = document.getElementById("overlaps");
  section.hidden = !overlaps.length;
  section.replaceChildren();
  if (!overlaps.length) return;
  section.append(el("h3", { text: "Overlapping changes" }));
  for (const overlap of overlaps) {
    section.append(el("div", { text: `${overlap.units.join(" / ")}: ${overlap.files.join(", ")}` }));
  }
}

function renderConfigWarning(warning) {
  // SPEC 3.16: a read reports a config problem in one line; text only (the file is anyone's).
  const section = document.getElementById("config-warning");
  const shown = warning && typeof warning === "object";
  section.hidden = !shown;
  section.replaceChildren();
  if (!shown) return;
  const more = Number(warning.problems) > 1 ? ` (and ${Number(warning.problems) - 1} more)` : "";
  section.append(`config warning: ${String(warning.reason)}${more}; ignored, see: `,
    el("code", { text: "unit config" }));
}

function render() {
  const document_ = state.status;
  if (!document_) return;
  document.getElementById("repo").textContent = document_.repository;
  document.getElementById("observed").textContent = `observed ${ago(document_.observed_at) || document_.observed_at}`;
  renderBanner(document_.units);
  renderConfigWarning(document_.config_warning);
  renderUnits(document_.units);
  renderOverlaps(document_.overlaps || []);
  if (state.detail) renderDetail(state.detail);
}

function timelineItems(detail) {
  const items = [];
  for (const turn of detail.turns || []) {
    const words = [`turn #${turn.seq} ${turn.kind || ""}`, turn.status].filter(Boolean);
    items.push({ at: turn.finished_at || turn.started_at, what: words.join(" → "), status: turn.status,
      note: turn.reason || turn.reply_first_line || "" });
  }
  // A journal step is written `started`, then `done`/`skipped`/`failed`: one line per step.
  const open = new Map();
  for (const event of detail.events || []) {
    const what = `${event.command || "event"} · ${event.step || ""}`;
    const raw = event.reason || (event.detail && (event.detail.skipped || event.detail.reason)) || "";
    const note = typeof raw === "string" ? raw : JSON.stringify(raw);
    const started = open.get(what);
    if (started && event.status !== "started") {
      open.delete(what);
      const seconds = (Date.parse(event.at) - Date.parse(started.at)) / 1000;
      Object.assign(started, { at: event.at, status: event.status, note: note || started.note,
        took: Number.isFinite(seconds) && seconds >= 1 ? `${Math.round(seconds)}s` : null });
      continue;
    }
    const item = { at: event.at, what, status: event.status, note };
    if (event.status === "started") open.set(what, item);
    items.push(item);
  }
  // Newest first; within one second, the later-written entry first.
  const ordered = items.map((item, index) => ({ item, index, at: Date.parse(item.at) || 0 }));
  ordered.sort((a, b) => b.at - a.at || b.index - a.index);
  return ordered.map(({ item }) => item);
}

function renderDetail(detail) {
  const section = document.getElementById("detail");
  section.hidden = false;
  document.getElementById("detail-title").textContent = `Unit ${detail.unit_id}`;
  const transcript = detail.transcript;
  const pre = document.getElementById("transcript");
  const meta = document.getElementById("transcript-meta");
  const atBottom = pre.scrollTop + pre.clientHeight >= pre.scrollHeight - 4;
  if (detail.untrusted) {
    meta.textContent = `not shown: ${detail.untrusted}`;
    pre.textContent = "";
  } else if (!transcript) {
    meta.textContent = "no turn yet";
    pre.textContent = "";
  } else if (transcript.error) {
    meta.textContent = transcript.error;
    pre.textContent = "";
  } else {
    meta.textContent = `turn #${transcript.seq} ${transcript.kind} · ${size(transcript.bytes)}` +
      (transcript.truncated ? " · the last 64 KiB" : "");
    if (pre.textContent !== transcript.text) pre.textContent = transcript.text || "(no output yet)";
  }
  if (atBottom) pre.scrollTop = pre.scrollHeight;
  const timeline = document.getElementById("timeline");
  timeline.replaceChildren(...timelineItems(detail).map((item) =>
    el("li", { "data-status": item.status || "" },
      el("div", {}, el("span", { class: "what", text: item.what }), " ",
        el("span", { class: "status", text: item.status || "" }), " ",
        el("span", { class: "when", title: item.at || "", text: [ago(item.at), item.took && `took ${item.took}`].filter(Boolean).join(" · ") })),
      item.note ? el("div", { class: "sub", text: item.note }) : null)));
}

async function getJson(path) {
  const response = await fetch(path, { cache: "no-store", credentials: "same-origin" });
  const body = await response.json();
  if (!response.ok) throw new Error(body.reason || `HTTP ${response.status}`);
  return body;
}

function setLive(ok, text) {
  const live = document.getElementById("live");
  live.dataset.state = ok ? "live" : "offline";
  live.textContent = text;
}

async function openDetail(unitId) {
  state.selected = unitId;
  try {
    state.detail = await getJson(`/api/units/${encodeURIComponent(unitId)}`);
    render();
  } catch (error) {
    setLive(false, `cannot read ${unitId}: ${error.message}`);
  }
}

async function pollStatus() {
  try {
    state.status = await getJson("/api/status");
    setLive(true, "live");
    render();
  } catch (error) {
    setLive(false, `offline — retrying (${error.message})`);
  }
  setTimeout(pollStatus, STATUS_EVERY_MS);
}

async function pollList() {
  try {
    state.list = await getJson("/api/list");
    render();
  } catch (_error) {
    // The status poll reports the connection; models and PRs wait for the next round.
  }
  setTimeout(pollList, LIST_EVERY_MS);
}

async function pollChecks() {
  const listed = (state.list && state.list.units) || [];
  if (listed.some((unit) => unit.observed && Array.isArray(unit.observed.pull_requests))) {
    try {
      state.checks = await getJson("/api/checks");
      render();
    } catch (_error) {
      // Shown as missing checks; the next round tries again.
    }
  }
  setTimeout(pollChecks, state.checks ? CHECKS_EVERY_MS : LIST_EVERY_MS);
}

function pollDetail() {
  if (state.selected) openDetail(state.selected);
  setTimeout(pollDetail, DETAIL_EVERY_MS);
}

function closeDetail() {
  state.selected = null;
  state.detail = null;
  document.getElementById("detail").hidden = true;
  render();
}

document.getElementById("detail-close").addEventListener("click", closeDetail);
document.addEventListener("keydown", (event) => {
  if (event.key === "Escape" && state.selected) closeDetail();
});

pollStatus();
pollList();
setTimeout(pollChecks, 500);
setTimeout(pollDetail, DETAIL_EVERY_MS);

// The shock dashboard: polls the service's JSON and redraws. Data is written with
// textContent only, never parsed as HTML. The token stays in this tab (sessionStorage)
// and travels only in the Authorization header of POSTs.
"use strict";

const STATE_EVERY_MS = 1000;
const TIMELINE_EVERY_MS = 2000;
const TOKEN_KEY = "shock-dashboard-token";
let viewer = null; // {user, admin} once logged in

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (key === "class") node.className = value;
    else if (key.startsWith("data-")) node.setAttribute(key, value);
    else node[key] = value;
  }
  for (const child of children) {
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

function fillTable(id, rows) {
  document.querySelector(`#${id} tbody`).replaceChildren(...rows);
}

function showMessage(text) {
  document.getElementById("message").textContent = text || "";
}

function duration(seconds) {
  if (seconds < 60) return `${seconds.toFixed(0)} s`;
  if (seconds < 3600) return `${(seconds / 60).toFixed(1)} min`;
  return `${(seconds / 3600).toFixed(1)} h`;
}

function percent(fraction) {
  return `${(100 * fraction).toFixed(0)}%`;
}

// As `shock jobs` and `shock watch` name them: "worker-1 GPUs 0,1 + worker-2 GPU 0".
function placement(gpus) {
  return gpus.map((p) => `${p.worker} ${p.gpus.length === 1 ? "GPU" : "GPUs"} ${p.gpus.join(",")}`).join(" + ");
}

function mayCancel(job) {
  return viewer !== null && (viewer.admin || viewer.user === job.user)
    && (job.state === "queued" || job.state === "running");
}

function drawSummary(state) {
  const totals = state.totals;
  const card = (label, value) => el("div", { class: "card" }, el("b", {}, value), label);
  document.getElementById("summary").replaceChildren(
    card("workers", state.workers.filter((w) => w.alive).length),
    card("GPUs busy", `${totals.gpus_busy} / ${totals.gpus}`),
    card("running", totals.running),
    card("queued", totals.queued),
    card("jobs", totals.jobs),
  );
}

function drawWorkers(workers) {
  fillTable("workers", workers.map((w) => el("tr", { class: w.alive ? "" : "dead", "data-worker-id": w.id },
    el("td", {}, w.id), el("td", {}, w.hostname), el("td", {}, w.gpu_type),
    el("td", {}, ...w.gpu_jobs.map((job, gpu) => el("span", {
      class: job === null ? "gpu" : "gpu held",
      title: job === null ? `GPU ${gpu}: free` : `GPU ${gpu}: job ${job}`,
    }, job === null ? gpu : job))),
    el("td", {}, w.alive ? "alive" : "dead"))));
}

function progressBar(fraction, label) {
  const bar = el("div", { class: "bar" }, el("span", {}));
  bar.firstChild.style.width = percent(fraction);
  return el("div", {}, bar, el("span", { class: "bar-label" }, label));
}

function drawJobs(jobs) {
  fillTable("jobs", jobs.slice().reverse().map((job) => {
    const action = el("td", {});
    if (mayCancel(job)) {
      action.append(el("button", { type: "button", class: "cancel", onclick: () => cancelJob(job.id) }, "Cancel"));
    }
    return el("tr", { "data-job-id": job.id },
      el("td", {}, job.id), el("td", { class: "user" }, job.user),
      el("td", { class: `state state-${job.state}`, title: job.message }, job.state),
      el("td", {}, job.job_type),
      el("td", { class: "progress" }, progressBar(job.progress, `${job.step} / ${job.target_steps}`)),
      el("td", {}, placement(job.gpus)), el("td", {}, duration(job.queued_s)), action);
  }));
}

function drawAllocation(state) {
  document.getElementById("round").textContent = state.round;
  fillTable("allocation", state.allocation.map((a) => el("tr", {},
    el("td", {}, a.job_id), el("td", {}, a.worker), el("td", {}, a.gpus.join(",")))));
}

function drawShares(shares) {
  fillTable("shares", shares.map((s) => {
    const bar = el("div", { class: "bar", title: `fair share ${percent(s.fair_share)}` }, el("span", {}), el("i", {}));
    bar.children[0].style.width = percent(Math.min(1, s.share));
    bar.children[1].style.left = percent(Math.min(1, s.fair_share));
    return el("tr", { "data-user": s.user },
      el("td", {}, s.user), el("td", {}, s.weight), el("td", {}, s.gpus),
      el("td", {}, bar, el("span", { class: "bar-label" }, `${percent(s.share)} of GPUs; fair ${percent(s.fair_share)}`)),
      el("td", {}, `${percent(s.recent.share)} (fair ${percent(s.recent.fair_share)})`),
      el("td", {}, `${percent(s.since_start.share)} (fair ${percent(s.since_start.fair_share)})`),
      el("td", {}, (s.since_start.gpu_seconds / 3600).toFixed(2)));
  }));
}

const SVG = "http://www.w3.org/2000/svg";

function polyline(points, colour) {
  const line = document.createElementNS(SVG, "polyline");
  line.setAttribute("points", points.map(([x, y]) => `${x.toFixed(1)},${y.toFixed(1)}`).join(" "));
  line.setAttribute("fill", "none");
  line.setAttribute("stroke", colour);
  line.setAttribute("stroke-width", "2");
  line.setAttribute("vector-effect", "non-scaling-stroke");
  return line;
}

function drawChart(samples) {
  const svg = document.getElementById("chart");
  const width = 600, height = 160, pad = 8;
  if (samples.length < 2) {
    svg.replaceChildren();
    return;
  }
  const t0 = samples[0].time_unix, span = Math.max(1e-9, samples[samples.length - 1].time_unix - t0);
  const x = (s) => pad + (width - 2 * pad) * (s.time_unix - t0) / span;
  const y = (fraction) => height - pad - (height - 2 * pad) * fraction;
  const maxQueue = Math.max(1, ...samples.map((s) => s.queued));
  document.getElementById("queue-max").textContent = maxQueue;
  document.getElementById("chart-span").textContent = duration(span);
  const style = getComputedStyle(document.documentElement);
  svg.replaceChildren(
    polyline(samples.map((s) => [x(s), y(s.gpus_total ? s.gpus_busy / s.gpus_total : 0)]), style.getPropertyValue("--busy")),
    polyline(samples.map((s) => [x(s), y(s.queued / maxQueue)]), style.getPropertyValue("--queue")),
  );
}

async function getJSON(path) {
  const response = await fetch(path, { cache: "no-store" });
  if (!response.ok) throw new Error(`${path}: HTTP ${response.status}`);
  return response.json();
}

async function post(path) {
  const token = sessionStorage.getItem(TOKEN_KEY) || "";
  const response = await fetch(path, { method: "POST", headers: { Authorization: `Bearer ${token}` } });
  const body = await response.json();
  if (!response.ok) throw new Error(body.error || `HTTP ${response.status}`);
  return body;
}

let lastState = null;

async function refreshState() {
  try {
    const state = await getJSON("/api/state");
    lastState = state;
    drawSummary(state);
    drawWorkers(state.workers);
    drawJobs(state.jobs);
    drawAllocation(state);
    drawShares(state.shares);
    document.getElementById("status").textContent = `updated ${new Date(state.time_unix * 1000).toLocaleTimeString()}`;
  } catch (error) {
    document.getElementById("status").textContent = `cannot reach the service (${error.message})`;
  }
}

async function refreshTimeline() {
  try {
    drawChart((await getJSON("/api/timeline")).samples);
  } catch (error) {
    document.getElementById("status").textContent = `cannot reach the service (${error.message})`;
  }
}

async function cancelJob(jobId) {
  try {
    const reply = await post(`/api/jobs/${jobId}/cancel`);
    showMessage(`job ${reply.job_id} ${reply.state}`);
  } catch (error) {
    showMessage(`cannot cancel job ${jobId}: ${error.message}`);
  }
  refreshState();
}

function showViewer() {
  document.getElementById("login").hidden = viewer !== null;
  document.getElementById("viewer").hidden = viewer === null;
  document.getElementById("viewer-name").textContent = viewer ? `${viewer.user}${viewer.admin ? " (admin)" : ""}` : "";
  if (lastState) drawJobs(lastState.jobs);
}

async function logIn(token) {
  sessionStorage.setItem(TOKEN_KEY, token);
  try {
    viewer = await post("/api/login");
    showMessage("");
  } catch (error) {
    sessionStorage.removeItem(TOKEN_KEY);
    viewer = null;
    showMessage(`cannot log in: ${error.message}`);
  }
  showViewer();
}

document.getElementById("login").addEventListener("submit", (event) => {
  event.preventDefault();
  const input = document.getElementById("token");
  const token = input.value.trim();
  input.value = "";
  if (token) logIn(token);
});

document.getElementById("logout").addEventListener("click", () => {
  sessionStorage.removeItem(TOKEN_KEY);
  viewer = null;
  showViewer();
});

if (sessionStorage.getItem(TOKEN_KEY)) logIn(sessionStorage.getItem(TOKEN_KEY));
refreshState();
refreshTimeline();
setInterval(refreshState, STATE_EVERY_MS);
setInterval(refreshTimeline, TIMELINE_EVERY_MS);

// rtvox web page: streams /v1/tts as raw 24 kHz 16-bit PCM, plays it with Web Audio as it arrives and draws
// the waveform. No build step, no external scripts. window.rtvox exposes the state for the browser test.
"use strict";

const SAMPLE_RATE = 24000;
const $ = (id) => document.getElementById(id);
const state = { status: "idle", samples: 0, chunks: 0, ttfaMs: null, error: null, voices: [], peak: 0, warnings: [] };
window.rtvox = state;

let audioCtx = null;
let playhead = 0;
let controller = null;
let pcm = [];  // Float32Array pieces received so far

function headers(extra) {
  const h = Object.assign({}, extra || {});
  const key = $("api-key").value.trim();
  if (key) h["Authorization"] = "Bearer " + key;
  return h;
}

// What the server left out of the text (a script it cannot read), from its X-Rtvox-Warnings header.
function unspoken(response) {
  const header = response.headers.get("X-Rtvox-Warnings");
  if (!header) return [];
  try { return JSON.parse(header); } catch (err) { return [header]; }
}

function setStatus(text, status) {
  $("status").textContent = text;
  if (status) state.status = status;
}

async function errorMessage(response) {
  try {
    const body = await response.json();
    return body.error ? body.error.message : response.statusText;
  } catch (_) {
    return response.status + " " + response.statusText;
  }
}

// ------------------------------------------------------------------ voices and emotions
async function loadVoices(select) {
  const response = await fetch("/v1/audio/voices", { headers: headers() });
  if (!response.ok) { setStatus("cannot list voices: " + (await errorMessage(response)), "error"); return; }
  const body = await response.json();
  state.voices = body.data.map((v) => v.id);
  const menu = $("voice");
  menu.textContent = "";
  for (const v of body.data) {
    const option = document.createElement("option");
    option.value = v.id;
    option.textContent = v.type === "builtin" ? v.name + " (built-in, " + v.gender + ")" : v.name + " (clone)";
    menu.appendChild(option);
  }
  if (select) menu.value = select;
}

async function loadEmotions() {
  // The allowed labels are in the API schema: one list, kept by the server.
  const response = await fetch("/openapi.json");
  if (!response.ok) return;
  const schema = await response.json();
  const prop = schema.components.schemas.TTSRequest.properties.emotion;
  const pattern = (prop.anyOf || [prop]).map((p) => p.pattern).find(Boolean) || "";
  const match = /^\^\((.*)\)\$$/.exec(pattern);
  if (!match) return;
  for (const label of match[1].split("|")) {
    const option = document.createElement("option");
    option.value = option.textContent = label;
    $("emotion").appendChild(option);
  }
}

// ------------------------------------------------------------------ playback and drawing
function schedule(samples) {
  if (!audioCtx) return;
  const buffer = audioCtx.createBuffer(1, samples.length, SAMPLE_RATE);
  buffer.copyToChannel(samples, 0);
  const source = audioCtx.createBufferSource();
  source.buffer = buffer;
  source.connect(audioCtx.destination);
  playhead = Math.max(playhead, audioCtx.currentTime + 0.05);
  source.start(playhead);
  playhead += buffer.duration;
}

function draw() {
  const canvas = $("wave");
  const g = canvas.getContext("2d");
  const w = canvas.width, h = canvas.height, mid = h / 2;
  g.fillStyle = "#0f1720";
  g.fillRect(0, 0, w, h);
  const total = state.samples;
  if (!total) return;
  // Scaled to the loudest sample so quiet speech still shows its shape.
  const scale = (mid - 2) / Math.max(state.peak, 1e-3);
  g.strokeStyle = "#4fa3ff";
  g.beginPath();
  const perPixel = Math.max(1, Math.ceil(total / w));
  let column = 0, lo = 1, hi = -1, count = 0;
  for (const piece of pcm) {
    for (let i = 0; i < piece.length; i++) {
      const v = piece[i];
      if (v < lo) lo = v;
      if (v > hi) hi = v;
      if (++count === perPixel) {
        g.moveTo(column + 0.5, mid - hi * scale);
        g.lineTo(column + 0.5, mid - lo * scale + 1);
        column++; lo = 1; hi = -1; count = 0;
      }
    }
  }
  g.stroke();
}

function toFloat(bytes) {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const out = new Float32Array(bytes.byteLength >> 1);
  for (let i = 0; i < out.length; i++) {
    out[i] = view.getInt16(i * 2, true) / 32768;
    state.peak = Math.max(state.peak, Math.abs(out[i]));
  }
  return out;
}

function wavBlob() {
  const data = new Int16Array(state.samples);
  let k = 0;
  for (const piece of pcm) for (let i = 0; i < piece.length; i++) data[k++] = Math.max(-1, Math.min(1, piece[i])) * 32767;
  const header = new DataView(new ArrayBuffer(44));
  const text = (offset, s) => { for (let i = 0; i < s.length; i++) header.setUint8(offset + i, s.charCodeAt(i)); };
  text(0, "RIFF"); header.setUint32(4, 36 + data.byteLength, true); text(8, "WAVE");
  text(12, "fmt "); header.setUint32(16, 16, true); header.setUint16(20, 1, true); header.setUint16(22, 1, true);
  header.setUint32(24, SAMPLE_RATE, true); header.setUint32(28, SAMPLE_RATE * 2, true);
  header.setUint16(32, 2, true); header.setUint16(34, 16, true);
  text(36, "data"); header.setUint32(40, data.byteLength, true);
  return new Blob([header.buffer, data.buffer], { type: "audio/wav" });
}

// ------------------------------------------------------------------ speak
function requestBody() {
  const body = {
    text: $("text").value,
    speed: Number($("speed").value),
    response_format: "pcm",
    stream_format: "audio",
  };
  if ($("voice").value) body.voice = $("voice").value;
  if ($("emotion").value) { body.emotion = $("emotion").value; body.emotion_alpha = Number($("alpha").value); }
  if ($("instructions").value.trim()) body.instructions = $("instructions").value.trim();
  return body;
}

async function speak() {
  if (controller) controller.abort();
  controller = new AbortController();
  audioCtx = audioCtx || new AudioContext({ sampleRate: SAMPLE_RATE });
  if (audioCtx.state === "suspended") audioCtx.resume();
  playhead = 0;
  pcm = [];
  Object.assign(state, { samples: 0, chunks: 0, ttfaMs: null, error: null, peak: 0 });
  $("download").hidden = true;
  $("speak").disabled = true;
  $("stop").disabled = false;
  draw();
  setStatus("synthesizing…", "streaming");
  const started = performance.now();
  try {
    const response = await fetch("/v1/tts", {
      method: "POST",
      headers: headers({ "Content-Type": "application/json" }),
      body: JSON.stringify(requestBody()),
      signal: controller.signal,
    });
    if (!response.ok) throw new Error(await errorMessage(response));
    state.warnings = unspoken(response);
    const reader = response.body.getReader();
    let carry = null;  // an odd byte left over between network chunks
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      let bytes = value;
      if (carry) { bytes = new Uint8Array(value.length + 1); bytes[0] = carry[0]; bytes.set(value, 1); carry = null; }
      if (bytes.length % 2) { carry = bytes.slice(-1); bytes = bytes.subarray(0, bytes.length - 1); }
      if (!bytes.length) continue;
      const samples = toFloat(bytes);
      if (state.ttfaMs === null) state.ttfaMs = Math.round(performance.now() - started);
      pcm.push(samples);
      state.samples += samples.length;
      state.chunks += 1;
      schedule(samples);
      draw();
      setStatus("streaming… " + (state.samples / SAMPLE_RATE).toFixed(2) + " s, first audio after " + state.ttfaMs + " ms");
    }
    const link = $("download");
    link.href = URL.createObjectURL(wavBlob());
    link.hidden = false;
    const skipped = state.warnings.length ? " — not spoken: " + state.warnings.join("; ") : "";
    setStatus("done: " + (state.samples / SAMPLE_RATE).toFixed(2) + " s of audio, first audio after " + state.ttfaMs + " ms" + skipped, "done");
  } catch (err) {
    if (err.name === "AbortError") { setStatus("stopped", "stopped"); }
    else { state.error = String(err.message || err); setStatus("error: " + state.error, "error"); }
  } finally {
    controller = null;
    $("speak").disabled = false;
    $("stop").disabled = true;
  }
}

// ------------------------------------------------------------------ clone
async function clone() {
  const file = $("clone-file").files[0];
  const name = $("clone-name").value.trim() || (file ? file.name.replace(/\.[^.]*$/, "") : "");
  if (!file) { $("clone-status").textContent = "choose a clip first"; return; }
  const form = new FormData();
  form.append("name", name);
  form.append("audio_sample", file, file.name);
  $("clone-status").textContent = "uploading…";
  $("clone").disabled = true;
  try {
    const response = await fetch("/v1/audio/voices", { method: "POST", headers: headers(), body: form });
    if (!response.ok) throw new Error(await errorMessage(response));
    const voice = await response.json();
    await loadVoices(voice.id);
    $("clone-status").textContent = "cloned: " + voice.name + " (" + voice.id + ")";
  } catch (err) {
    $("clone-status").textContent = "error: " + (err.message || err);
  } finally {
    $("clone").disabled = false;
  }
}

// ------------------------------------------------------------------ wiring
$("api-key").value = localStorage.getItem("rtvox-api-key") || "";
$("api-key").addEventListener("change", () => { localStorage.setItem("rtvox-api-key", $("api-key").value); loadVoices(); });
$("alpha").addEventListener("input", () => { $("alpha-value").textContent = Number($("alpha").value).toFixed(1); });
$("speed").addEventListener("input", () => { $("speed-value").textContent = Number($("speed").value).toFixed(2); });
$("speak").addEventListener("click", speak);
$("stop").addEventListener("click", () => controller && controller.abort());
$("clone").addEventListener("click", clone);
draw();
Promise.all([loadVoices(), loadEmotions()]).then(() => { if (state.status === "idle") setStatus("ready", "ready"); });

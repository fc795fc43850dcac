// ConceptLens projection view: a Streamlit component (protocol v1) that draws a 2-D
// projection with WebGL2 and does everything a gesture needs in the browser: pan and zoom
// (a uniform transform), hover (a CPU grid finds the point under the cursor; its caption
// and thumbnail show without asking the server, or, for a view too large to send its
// captions with its points, after one HTTP request per block of them), box and lasso selection (point in
// polygon here). Python hears only a committed selection or a click, once, on mouse-up.
//
// Arguments (components/projection.py builds them):
//   xy      bytes: Float32 x0, y0, x1, y1, ... (data coordinates)
//   codes   bytes: Uint16 palette index per point
//   ring    bytes or null: Uint8 per point, 1 = ringed (the chosen cluster)
//   text    bytes or null: UTF-8 lines "id\tcaption\tthumbnail path", one per point
//   palette ["#rrggbb", ...]; names [legend name per palette entry]; legend [palette indices shown]
//   region  null or {kind: "box"|"lasso", x: [...], y: [...]}: the selection drawn (from the URL)
//   data_key, ring_key: change when the points / the ring change
//   thumb_base: URL prefix of thumbnails (relative to this frame) or null
//   captions_url, caption_block: without `text`, the URL whose /<b> answers the lines of
//                points b * caption_block ..., fetched when the cursor reaches one of them
//   height, max_ids, title
//   report_drawn: tell the page once this view has drawn its points (or could not): the
//                 page sent the view first and sends the rest when it hears (projection.py)

import { makeGrid, nearest } from "./grid.js";
import { pointsInBox, pointsInPolygon, boxRegion, lassoRegion } from "./select.js";

const MAX_POINTS = 4_000_000; // beyond this the page must pass a binned overview
const HOVER_PX = 8;

// ---- Streamlit component protocol (v1) ---------------------------------------------------
function send(type, data) {
  window.parent.postMessage({ isStreamlitMessage: true, type, ...data }, "*");
}
function setFrameHeight(h) {
  send("streamlit:setFrameHeight", { height: h });
}
function setComponentValue(value) {
  send("streamlit:setComponentValue", { value, dataType: "json" });
}

// ---- state ------------------------------------------------------------------------------
const S = {
  n: 0,
  xy: null,
  codes: null,
  flags: null, // bit 0 selected, bit 1 ringed
  lines: null,
  textBytes: null,
  captionBlocks: new Map(), // block -> its lines, or null while fetched (captions_url)
  captionsUrl: null,
  tipAt: null, // [i, px, py] of the tip shown
  grid: null,
  bounds: null,
  view: null, // {cx, cy, k}: data centre and pixels per data unit
  mode: "pan",
  dataKey: null,
  ringKey: null,
  regionKey: null,
  region: null, // {kind, x, y} drawn
  selCount: 0,
  selIdx: null,
  ringIdx: null,
  hover: -1,
  args: {},
  seq: 0,
  lastCommit: null,
  draws: 0,
};
window.__projection = S; // read by the browser tests and the bench

const $ = (id) => document.getElementById(id);
const glCanvas = $("gl");
const overlay = $("overlay");
const stage = $("stage");
const tip = $("tip");
const statusEl = $("status");
const gl = glCanvas.getContext("webgl2", { antialias: false, premultipliedAlpha: true, preserveDrawingBuffer: true });

let W = 0;
let H = 0;
let dpr = 1;

// ---- WebGL2 -----------------------------------------------------------------------------
const VS = `#version 300 es
in vec2 a_xy;
in uint a_code;
in uint a_flag;
uniform vec2 u_center;
uniform vec2 u_scale;
uniform float u_size;
uniform int u_hasSel;
uniform sampler2D u_pal;
out vec4 v_col;
flat out uint v_flag;
void main() {
  gl_Position = vec4((a_xy - u_center) * u_scale, 0.0, 1.0);
  vec3 c = texelFetch(u_pal, ivec2(int(a_code), 0), 0).rgb;
  float a = 0.75;
  if (u_hasSel == 1 && (a_flag & 1u) == 0u) { c = mix(c, vec3(0.86), 0.75); a = 0.4; }
  v_col = vec4(c, a);
  v_flag = a_flag;
  gl_PointSize = (a_flag & 2u) != 0u ? u_size + 4.0 : u_size;
}`;
const FS = `#version 300 es
precision mediump float;
in vec4 v_col;
flat in uint v_flag;
out vec4 o;
void main() {
  vec2 d = gl_PointCoord * 2.0 - 1.0;
  float r = dot(d, d);
  if (r > 1.0) discard;
  if ((v_flag & 2u) != 0u && r > 0.42) { o = vec4(0.0, 0.0, 0.0, 0.9); return; }
  o = vec4(v_col.rgb * v_col.a, v_col.a);
}`;

let prog, vao, bufXY, bufCode, bufFlag, bufSel, bufRing, palTex, U;

function compile(type, src) {
  const s = gl.createShader(type);
  gl.shaderSource(s, src);
  gl.compileShader(s);
  if (!gl.getShaderParameter(s, gl.COMPILE_STATUS)) throw new Error(gl.getShaderInfoLog(s));
  return s;
}

function initGL() {
  prog = gl.createProgram();
  gl.attachShader(prog, compile(gl.VERTEX_SHADER, VS));
  gl.attachShader(prog, compile(gl.FRAGMENT_SHADER, FS));
  gl.linkProgram(prog);
  if (!gl.getProgramParameter(prog, gl.LINK_STATUS)) throw new Error(gl.getProgramInfoLog(prog));
  U = {};
  for (const u of ["u_center", "u_scale", "u_size", "u_hasSel", "u_pal"]) U[u] = gl.getUniformLocation(prog, u);
  vao = gl.createVertexArray();
  gl.bindVertexArray(vao);
  bufXY = gl.createBuffer();
  bufCode = gl.createBuffer();
  bufFlag = gl.createBuffer();
  bufSel = gl.createBuffer();
  bufRing = gl.createBuffer();
  let loc = gl.getAttribLocation(prog, "a_xy");
  gl.bindBuffer(gl.ARRAY_BUFFER, bufXY);
  gl.enableVertexAttribArray(loc);
  gl.vertexAttribPointer(loc, 2, gl.FLOAT, false, 0, 0);
  loc = gl.getAttribLocation(prog, "a_code");
  gl.bindBuffer(gl.ARRAY_BUFFER, bufCode);
  gl.enableVertexAttribArray(loc);
  gl.vertexAttribIPointer(loc, 1, gl.UNSIGNED_SHORT, 0, 0);
  loc = gl.getAttribLocation(prog, "a_flag");
  gl.bindBuffer(gl.ARRAY_BUFFER, bufFlag);
  gl.enableVertexAttribArray(loc);
  gl.vertexAttribIPointer(loc, 1, gl.UNSIGNED_BYTE, 0, 0);
  palTex = gl.createTexture();
}

function hexRGB(h) {
  const v = parseInt(String(h).replace("#", "").slice(0, 6), 16);
  return [(v >> 16) & 255, (v >> 8) & 255, v & 255];
}

function uploadPalette(palette) {
  const n = Math.max(1, palette.length);
  const px = new Uint8Array(n * 4);
  palette.forEach((h, i) => {
    const [r, g, b] = hexRGB(h);
    px.set([r, g, b, 255], i * 4);
  });
  gl.bindTexture(gl.TEXTURE_2D, palTex);
  gl.texParameteri(gl.TEXTURE_2D, gl.TEXTURE_MIN_FILTER, gl.NEAREST);
  gl.texParameteri(gl.TEXTURE_2D, gl.TEXTURE_MAG_FILTER, gl.NEAREST);
  gl.texImage2D(gl.TEXTURE_2D, 0, gl.RGBA8, n, 1, 0, gl.RGBA, gl.UNSIGNED_BYTE, px);
}

// Copies a bytes argument into its own aligned buffer (a protobuf's bytes may start at any offset).
function typed(u8, Type) {
  if (!u8) return null;
  const copy = new Uint8Array(u8.byteLength);
  copy.set(u8);
  return new Type(copy.buffer, 0, Math.floor(u8.byteLength / Type.BYTES_PER_ELEMENT));
}

function pointSize() {
  const base = S.n <= 2000 ? 7 : S.n <= 10000 ? 5 : S.n <= 200000 ? 3.5 : 2.5;
  const zoom = S.view && S.fit ? S.view.k / S.fit.k : 1;
  return Math.min(base * Math.pow(Math.max(zoom, 1), 0.35), 14) * dpr;
}

function draw() {
  S.frame = 0;
  if (!S.n) return;
  gl.viewport(0, 0, glCanvas.width, glCanvas.height);
  gl.clearColor(1, 1, 1, 1);
  gl.clear(gl.COLOR_BUFFER_BIT);
  gl.enable(gl.BLEND);
  gl.blendFunc(gl.ONE, gl.ONE_MINUS_SRC_ALPHA);
  gl.useProgram(prog);
  gl.bindVertexArray(vao);
  const { cx, cy, k } = S.view;
  gl.uniform2f(U.u_center, cx, cy);
  gl.uniform2f(U.u_scale, (2 * k) / W, (2 * k) / H);
  gl.uniform1f(U.u_size, pointSize());
  gl.uniform1i(U.u_hasSel, S.selIdx ? 1 : 0);
  gl.activeTexture(gl.TEXTURE0);
  gl.bindTexture(gl.TEXTURE_2D, palTex);
  gl.uniform1i(U.u_pal, 0);
  gl.drawArrays(gl.POINTS, 0, S.n);
  // The selected points, then the ringed ones, again on top.
  if (S.selIdx && S.selIdx.length) {
    gl.bindBuffer(gl.ELEMENT_ARRAY_BUFFER, bufSel);
    gl.drawElements(gl.POINTS, S.selIdx.length, gl.UNSIGNED_INT, 0);
  }
  if (S.ringIdx && S.ringIdx.length) {
    gl.bindBuffer(gl.ELEMENT_ARRAY_BUFFER, bufRing);
    gl.drawElements(gl.POINTS, S.ringIdx.length, gl.UNSIGNED_INT, 0);
  }
  drawOverlay();
  S.draws += 1;
  document.body.dataset.draws = String(S.draws);
}

function redraw() {
  if (!S.frame) S.frame = requestAnimationFrame(draw);
}

// Only the overlay (the hovered point's ring): the points stay as drawn (the WebGL canvas
// keeps its buffer), so a hover costs the same at 1,000 points as at 1,000,000.
function redrawOverlay() {
  if (S.frame || S.overlayFrame) return; // a full draw (with the overlay) is coming
  S.overlayFrame = requestAnimationFrame(() => {
    S.overlayFrame = 0;
    if (!S.frame) drawOverlay();
  });
}

// ---- coordinates ------------------------------------------------------------------------
function toData(px, py) {
  const { cx, cy, k } = S.view;
  return [cx + (px - W / 2) / k, cy - (py - H / 2) / k];
}
function toScreen(x, y) {
  const { cx, cy, k } = S.view;
  return [W / 2 + (x - cx) * k, H / 2 - (y - cy) * k];
}
S.toData = toData;
S.toScreen = toScreen;

function fitView() {
  const b = S.bounds;
  const rx = Math.max(b[2] - b[0], 1e-9);
  const ry = Math.max(b[3] - b[1], 1e-9);
  const k = Math.min(W / rx, H / ry) * 0.94;
  S.fit = { cx: (b[0] + b[2]) / 2, cy: (b[1] + b[3]) / 2, k };
  S.view = { ...S.fit };
}

// ---- overlay: the drawn region, the shape being drawn, the hovered point -------------------
const octx = overlay.getContext("2d");
let drawing = null; // {kind, pts: [[px, py], ...]}

function drawOverlay() {
  octx.setTransform(dpr, 0, 0, dpr, 0, 0);
  octx.clearRect(0, 0, W, H);
  const path = (pts, close) => {
    octx.beginPath();
    pts.forEach(([x, y], i) => (i ? octx.lineTo(x, y) : octx.moveTo(x, y)));
    if (close) octx.closePath();
  };
  if (S.region && !drawing) {
    const r = S.region;
    let pts;
    if (r.kind === "box") {
      const [x0, x1] = [Math.min(...r.x), Math.max(...r.x)];
      const [y0, y1] = [Math.min(...r.y), Math.max(...r.y)];
      pts = [[x0, y0], [x1, y0], [x1, y1], [x0, y1]].map(([x, y]) => toScreen(x, y));
    } else pts = r.x.map((x, i) => toScreen(x, r.y[i]));
    path(pts, true);
    octx.setLineDash([5, 4]);
    octx.strokeStyle = "rgba(30,30,30,0.85)";
    octx.lineWidth = 1.5;
    octx.stroke();
    octx.setLineDash([]);
  }
  if (drawing) {
    let pts = drawing.pts;
    if (drawing.kind === "box" && pts.length > 1) {
      const [a, b] = [pts[0], pts[pts.length - 1]];
      pts = [a, [b[0], a[1]], b, [a[0], b[1]]];
    }
    path(pts, true);
    octx.fillStyle = "rgba(40,100,220,0.12)";
    octx.fill();
    octx.strokeStyle = "rgba(40,100,220,0.9)";
    octx.lineWidth = 1.5;
    octx.stroke();
  }
  if (S.hover >= 0) {
    const [px, py] = toScreen(S.xy[2 * S.hover], S.xy[2 * S.hover + 1]);
    octx.beginPath();
    octx.arc(px, py, pointSize() / dpr / 2 + 4, 0, 2 * Math.PI);
    octx.strokeStyle = "#000";
    octx.lineWidth = 2;
    octx.stroke();
  }
}

// ---- selection ----------------------------------------------------------------------------
function setSelection(mask, count) {
  for (let i = 0; i < S.n; i++) S.flags[i] = (S.flags[i] & ~1) | mask[i];
  S.selCount = count;
  if (count) {
    S.selIdx = new Uint32Array(count);
    for (let i = 0, j = 0; i < S.n; i++) if (mask[i]) S.selIdx[j++] = i;
    gl.bindBuffer(gl.ELEMENT_ARRAY_BUFFER, bufSel);
    gl.bufferData(gl.ELEMENT_ARRAY_BUFFER, S.selIdx, gl.DYNAMIC_DRAW);
  } else S.selIdx = null;
  gl.bindBuffer(gl.ARRAY_BUFFER, bufFlag);
  gl.bufferData(gl.ARRAY_BUFFER, S.flags, gl.DYNAMIC_DRAW);
  status();
}

function clearSelection() {
  setSelection(new Uint8Array(S.n), 0);
  S.region = null;
}

// The region as the URL keeps it (rounded as Python's region_text rounds), then the points in it.
function applyRegion(region) {
  const mask = new Uint8Array(S.n);
  let count = 0;
  if (region.kind === "box") count = pointsInBox(S.xy, S.n, region.x, region.y, mask);
  else count = pointsInPolygon(S.xy, S.n, region.x, region.y, mask);
  setSelection(mask, count);
  S.region = region;
  return count;
}

function commitSelection(kind, dataPts) {
  const region = kind === "box" ? boxRegion(dataPts) : lassoRegion(dataPts);
  if (!region) return;
  const t0 = performance.now();
  const count = applyRegion(region);
  S.selectMs = performance.now() - t0;
  draw(); // the view shows the selection before Python hears of it
  gl.finish();
  S.selectDrawnMs = performance.now() - (S.pointerUpAt ?? t0); // read by bench/projection_browser.py
  const maxIds = S.args.max_ids ?? 200000;
  const value = {
    event: "select",
    kind,
    x: region.x,
    y: region.y,
    n: count,
    indices: count <= maxIds ? Array.from(S.selIdx || []) : null,
    seq: ++S.seq,
  };
  S.lastCommit = value;
  setComponentValue(value);
}

// ---- status, legend, tooltip ---------------------------------------------------------------
function status() {
  const n = S.n.toLocaleString("en-US");
  statusEl.textContent = S.selCount
    ? `${n} points · ${S.selCount.toLocaleString("en-US")} selected`
    : `${n} points`;
}

function legend(args) {
  const el = $("legend");
  el.textContent = "";
  const shown = args.legend || [];
  if (!shown.length) {
    el.hidden = true;
    return;
  }
  el.hidden = false;
  if (args.title) {
    const t = document.createElement("div");
    t.style.fontWeight = "600";
    t.textContent = args.title;
    el.appendChild(t);
  }
  for (const i of shown) {
    const row = document.createElement("div");
    const sw = document.createElement("span");
    sw.className = "sw";
    sw.style.background = args.palette[i];
    row.appendChild(sw);
    row.appendChild(document.createTextNode(args.names[i] ?? ""));
    el.appendChild(row);
  }
}

const KEEP_CAPTION_BLOCKS = 64;

function line(i) {
  if (S.textBytes) {
    if (!S.lines) S.lines = new TextDecoder().decode(S.textBytes).split("\n");
    return S.lines[i] ?? null;
  }
  const url = S.args.captions_url;
  const size = Number(S.args.caption_block) || 0;
  if (!url || !size) return null;
  if (url !== S.captionsUrl) {
    S.captionBlocks = new Map();
    S.captionsUrl = url;
  }
  const b = Math.floor(i / size);
  const got = S.captionBlocks.get(b);
  if (got) return got[i - b * size] ?? null;
  if (got === undefined) {
    S.captionBlocks.set(b, null); // asked for once
    fetch(`${url}/${b}`)
      .then((r) => {
        if (!r.ok) throw new Error(`the captions answered ${r.status}`);
        return r.text();
      })
      .then((text) => {
        if (S.captionsUrl !== url) return;
        S.captionBlocks.set(b, text.split("\n"));
        while (S.captionBlocks.size > KEEP_CAPTION_BLOCKS) S.captionBlocks.delete(S.captionBlocks.keys().next().value);
        // The tip of a point of this block, still shown, gets its caption.
        if (S.tipAt && Math.floor(S.tipAt[0] / size) === b && S.hover === S.tipAt[0]) showTip(...S.tipAt);
      })
      .catch(() => S.captionBlocks.delete(b)); // asked again on the next hover
  }
  return null;
}

function showTip(i, px, py) {
  if (i < 0) {
    tip.style.display = "none";
    S.tipAt = null;
    return;
  }
  S.tipAt = [i, px, py];
  const raw = line(i);
  const [id, caption, thumb] = raw ? raw.split("\t") : [`point ${i}`, "", ""];
  const name = S.args.names[S.codes[i]];
  tip.textContent = "";
  if (thumb && S.args.thumb_base) {
    const img = document.createElement("img");
    img.alt = id;
    img.src = S.args.thumb_base + thumb.split("/").map(encodeURIComponent).join("/");
    // The thumbnail arrives after the tip is placed: place it again at its full height.
    img.addEventListener("load", () => {
      if (S.tipAt && S.tipAt[0] === i) placeTip(px, py);
    });
    tip.appendChild(img);
  }
  const b = document.createElement("b");
  b.textContent = id;
  tip.appendChild(b);
  // The caption names the colour's value too (components/projection.py); without captions
  // (too many points to send them) the legend's name of the point's colour stands in.
  const rest = raw ? caption : S.args.title && name != null ? `${S.args.title}: ${name}` : "";
  if (rest) tip.appendChild(document.createTextNode("\n" + rest));
  tip.style.display = "block";
  placeTip(px, py);
}

// Below and right of the pointer; left of it where it would pass the right edge, above it
// where it would pass the bottom edge (it flips, rather than being cut or covering the point).
function placeTip(px, py) {
  const tw = tip.offsetWidth;
  const th = tip.offsetHeight;
  tip.style.left = `${Math.max(0, px + 14 + tw > W ? px - tw - 14 : px + 14)}px`;
  tip.style.top = `${Math.max(0, py + 14 + th > H ? py - th - 14 : py + 14)}px`;
}

// ---- gestures ----------------------------------------------------------------------------------
function setMode(m) {
  S.mode = m;
  for (const k of ["pan", "box", "lasso"]) $(`mode-${k}`).setAttribute("aria-pressed", String(k === m));
  glCanvas.style.cursor = m === "pan" ? "grab" : "crosshair";
}
$("mode-pan").onclick = () => setMode("pan");
$("mode-box").onclick = () => setMode("box");
$("mode-lasso").onclick = () => setMode("lasso");
$("reset").onclick = () => {
  S.view = { ...S.fit };
  redraw();
};
$("clear").onclick = () => {
  if (!S.selCount && !S.region) return;
  clearSelection();
  draw();
  S.lastCommit = { event: "clear", seq: ++S.seq };
  setComponentValue(S.lastCommit);
};

let drag = null;
function pos(e) {
  const r = glCanvas.getBoundingClientRect();
  return [e.clientX - r.left, e.clientY - r.top];
}

glCanvas.addEventListener("pointerdown", (e) => {
  if (!S.n || e.button !== 0) return;
  glCanvas.setPointerCapture(e.pointerId);
  const p = pos(e);
  drag = { start: p, last: p, moved: false, view: { ...S.view } };
  if (S.mode !== "pan") drawing = { kind: S.mode, pts: [p] };
  showTip(-1);
});

glCanvas.addEventListener("pointermove", (e) => {
  if (!S.n) return;
  const p = pos(e);
  if (drag) {
    if (Math.hypot(p[0] - drag.start[0], p[1] - drag.start[1]) > 3) drag.moved = true;
    if (S.mode === "pan") {
      S.view.cx = drag.view.cx - (p[0] - drag.start[0]) / S.view.k;
      S.view.cy = drag.view.cy + (p[1] - drag.start[1]) / S.view.k;
      redraw();
    } else if (drawing) {
      const last = drawing.pts[drawing.pts.length - 1];
      if (drawing.kind === "box") drawing.pts = [drawing.pts[0], p];
      else if (Math.hypot(p[0] - last[0], p[1] - last[1]) >= 2) drawing.pts.push(p);
      redraw();
    }
    drag.last = p;
    return;
  }
  hoverAt(p);
});

function hoverAt(p) {
  const [x, y] = toData(p[0], p[1]);
  const i = nearest(S.grid, S.xy, x, y, (Math.max(HOVER_PX, pointSize() / dpr / 2 + 2)) / S.view.k);
  if (i !== S.hover) {
    S.hover = i;
    redrawOverlay();
  }
  showTip(i, p[0], p[1]);
}

glCanvas.addEventListener("pointerup", (e) => {
  if (!drag) return;
  S.pointerUpAt = performance.now();
  const p = pos(e);
  const d = drag;
  drag = null;
  const shape = drawing;
  drawing = null;
  if (!d.moved) {
    // A click: the point under it, if any, is looked at (Python shows its image).
    const [x, y] = toData(p[0], p[1]);
    const i = nearest(S.grid, S.xy, x, y, Math.max(HOVER_PX, pointSize() / dpr / 2 + 2) / S.view.k);
    redraw();
    if (i >= 0) {
      S.lastCommit = { event: "click", index: i, seq: ++S.seq };
      setComponentValue(S.lastCommit);
    }
    return;
  }
  if (shape) {
    const pts = shape.kind === "box" ? [shape.pts[0], p] : [...shape.pts, p];
    if (shape.kind === "lasso" && pts.length < 3) return redraw();
    commitSelection(shape.kind, pts.map(([a, b]) => toData(a, b)));
  } else redraw();
});

glCanvas.addEventListener("pointerleave", () => {
  if (drag) return;
  S.hover = -1;
  showTip(-1);
  redrawOverlay();
});

glCanvas.addEventListener(
  "wheel",
  (e) => {
    if (!S.n) return;
    e.preventDefault();
    const p = pos(e);
    const [x, y] = toData(p[0], p[1]);
    const f = Math.exp(-e.deltaY * (e.deltaMode === 1 ? 0.05 : 0.0015));
    const k = Math.min(Math.max(S.view.k * f, S.fit.k / 4), S.fit.k * 5000);
    S.view.k = k;
    // Keep the data point under the cursor where it is.
    S.view.cx = x - (p[0] - W / 2) / k;
    S.view.cy = y + (p[1] - H / 2) / k;
    S.hover = -1;
    showTip(-1);
    redraw();
  },
  { passive: false },
);

// ---- size --------------------------------------------------------------------------------------
function resize(height) {
  dpr = window.devicePixelRatio || 1;
  W = Math.max(50, document.body.clientWidth - 2);
  H = height;
  stage.style.height = `${H}px`;
  for (const c of [glCanvas, overlay]) {
    c.width = Math.round(W * dpr);
    c.height = Math.round(H * dpr);
    c.style.width = `${W}px`;
    c.style.height = `${H}px`;
  }
  setFrameHeight(document.body.scrollHeight);
}

window.addEventListener("resize", () => {
  if (!S.n) return;
  const old = W;
  resize(H);
  if (S.view && old) S.view.k *= 1; // keep the centre and scale; the canvas shows more or less
  redraw();
});

// ---- render: new arguments from Python ------------------------------------------------------------
// A page that sent this view before its other elements (tables, figures) waits for its first
// draw to send them: told once per frame, whether the points were drawn or could not be.
function reportDrawn() {
  if (S.args && S.args.report_drawn && !S.reported) {
    S.reported = true;
    setComponentValue({ event: "drawn", seq: ++S.seq });
  }
}

function fail(text) {
  const m = $("msg");
  m.hidden = false;
  m.textContent = text;
  stage.hidden = true;
  setFrameHeight(document.body.scrollHeight);
  reportDrawn();
}

// Points served over HTTP (components/serving.py): one immutable file per data version, which
// the browser caches, instead of bytes in every session's websocket message. Layout: a
// little-endian uint32 header length, the JSON header {n, sections: {name: [offset, length]}},
// then the sections (float32 x/y interleaved, uint16 codes, UTF-8 caption lines).
const fetched = new Map(); // points_url -> {xy, codes, text}
let pendingUrl = null;

function unpack(buf) {
  const len = new DataView(buf).getUint32(0, true);
  const head = JSON.parse(new TextDecoder().decode(new Uint8Array(buf, 4, len)));
  const part = (name) => {
    const s = head.sections[name];
    return s ? new Uint8Array(buf, s[0], s[1]) : null;
  };
  return { xy: part("xy"), codes: part("codes"), text: part("text") };
}

function withPoints(args) {
  if (!args.points_url) return args;
  const got = fetched.get(args.points_url);
  if (got) return { ...args, ...got };
  if (pendingUrl !== args.points_url) {
    pendingUrl = args.points_url;
    const url = args.points_url;
    fetch(url)
      .then((r) => {
        if (!r.ok) throw new Error(`the points answered ${r.status}`);
        return r.arrayBuffer();
      })
      .then((buf) => {
        fetched.clear(); // one data version at a time is kept
        fetched.set(url, unpack(buf));
        if (pendingUrl === url) pendingUrl = null;
        if (S.args && S.args.points_url === url) onRender(S.args);
      })
      .catch((err) => {
        if (pendingUrl === url) pendingUrl = null;
        fail(`The points could not be loaded: ${err && err.message ? err.message : err}`);
      });
  }
  return null;
}

function onRender(raw) {
  S.args = raw;
  const args = withPoints(raw);
  if (!args) return; // drawn when the points arrive
  S.args = args;
  const height = Number(args.height) || 520;
  if (!gl) return fail("This browser has no WebGL2: the projection cannot be drawn here.");
  if (!prog) initGL();
  if (H !== height || !W) resize(height);
  if (args.data_key !== S.dataKey) {
    const xy = typed(args.xy, Float32Array);
    const n = Math.floor(xy.length / 2);
    if (n > MAX_POINTS) return fail(`${n.toLocaleString("en-US")} points are more than this view draws.`);
    S.n = n;
    S.xy = xy;
    S.codes = typed(args.codes, Uint16Array);
    S.flags = new Uint8Array(n);
    S.textBytes = args.text || null;
    S.lines = null;
    S.grid = makeGrid(xy, n);
    S.bounds = S.grid.bounds;
    gl.bindBuffer(gl.ARRAY_BUFFER, bufXY);
    gl.bufferData(gl.ARRAY_BUFFER, xy, gl.STATIC_DRAW);
    gl.bindBuffer(gl.ARRAY_BUFFER, bufCode);
    gl.bufferData(gl.ARRAY_BUFFER, S.codes, gl.STATIC_DRAW);
    uploadPalette(args.palette || ["#4c78a8"]);
    legend(args);
    const keepView = S.view && args.keep_view_key && args.keep_view_key === S.keepViewKey;
    if (!keepView) fitView();
    else S.fit = S.fit || { ...S.view };
    S.keepViewKey = args.keep_view_key;
    S.dataKey = args.data_key;
    S.ringKey = null;
    S.regionKey = null;
    S.selIdx = null;
    S.selCount = 0;
    S.hover = -1;
  }
  if (args.ring_key !== S.ringKey) {
    const ring = args.ring ? args.ring : null;
    const idx = [];
    for (let i = 0; i < S.n; i++) {
      const r = ring && ring[i] ? 2 : 0;
      S.flags[i] = (S.flags[i] & 1) | r;
      if (r) idx.push(i);
    }
    S.ringIdx = idx.length ? new Uint32Array(idx) : null;
    if (S.ringIdx) {
      gl.bindBuffer(gl.ELEMENT_ARRAY_BUFFER, bufRing);
      gl.bufferData(gl.ELEMENT_ARRAY_BUFFER, S.ringIdx, gl.STATIC_DRAW);
    }
    gl.bindBuffer(gl.ARRAY_BUFFER, bufFlag);
    gl.bufferData(gl.ARRAY_BUFFER, S.flags, gl.DYNAMIC_DRAW);
    S.ringKey = args.ring_key;
  }
  // The page passes a region only when it changed other than by this view (a link, Back,
  // another checkpoint): `region_seq` says so; a region this view drew stays as drawn.
  const regionKey = `${args.region_seq ?? ""}|${args.region ? JSON.stringify(args.region) : ""}`;
  if (regionKey !== S.regionKey) {
    if (args.region) applyRegion(args.region);
    else clearSelection();
    S.regionKey = regionKey;
  }
  status();
  draw();
  document.body.dataset.drawn = String(args.data_key);
  setFrameHeight(document.body.scrollHeight);
  reportDrawn();
}

window.addEventListener("message", (e) => {
  const d = e.data;
  if (d && d.type === "streamlit:render") {
    try {
      onRender(d.args || {});
    } catch (err) {
      fail(`The projection could not be drawn: ${err && err.message ? err.message : err}`);
    }
  }
});
setMode("pan");
send("streamlit:componentReady", { apiVersion: 1 });

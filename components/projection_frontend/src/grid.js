// A uniform grid over the points (a counting sort of their cells): the point nearest the
// cursor is looked for only in the cells within the hover radius.

export function makeGrid(xy, n) {
  let x0 = Infinity;
  let y0 = Infinity;
  let x1 = -Infinity;
  let y1 = -Infinity;
  for (let i = 0; i < n; i++) {
    const x = xy[2 * i];
    const y = xy[2 * i + 1];
    if (x < x0) x0 = x;
    if (x > x1) x1 = x;
    if (y < y0) y0 = y;
    if (y > y1) y1 = y;
  }
  if (!n) [x0, y0, x1, y1] = [0, 0, 1, 1];
  const g = Math.min(1024, Math.max(1, Math.ceil(Math.sqrt(n / 8))));
  const sx = g / Math.max(x1 - x0, 1e-12);
  const sy = g / Math.max(y1 - y0, 1e-12);
  const cellOf = new Uint32Array(n);
  const start = new Uint32Array(g * g + 1);
  for (let i = 0; i < n; i++) {
    const cx = Math.min(g - 1, Math.floor((xy[2 * i] - x0) * sx));
    const cy = Math.min(g - 1, Math.floor((xy[2 * i + 1] - y0) * sy));
    const c = cy * g + cx;
    cellOf[i] = c;
    start[c + 1]++;
  }
  for (let c = 0; c < g * g; c++) start[c + 1] += start[c];
  const fill = start.slice(0, g * g);
  const items = new Uint32Array(n);
  for (let i = 0; i < n; i++) items[fill[cellOf[i]]++] = i;
  return { g, x0, y0, sx, sy, start, items, bounds: [x0, y0, x1, y1] };
}

// The index of the point nearest (x, y) within `radius` (data units), or -1.
export function nearest(grid, xy, x, y, radius) {
  if (!grid) return -1;
  const { g, x0, y0, sx, sy, start, items } = grid;
  const cx0 = Math.max(0, Math.floor((x - radius - x0) * sx));
  const cx1 = Math.min(g - 1, Math.floor((x + radius - x0) * sx));
  const cy0 = Math.max(0, Math.floor((y - radius - y0) * sy));
  const cy1 = Math.min(g - 1, Math.floor((y + radius - y0) * sy));
  let best = -1;
  let bestD = radius * radius;
  if (cx0 > cx1 || cy0 > cy1) return -1;
  for (let cy = cy0; cy <= cy1; cy++) {
    for (let cx = cx0; cx <= cx1; cx++) {
      const c = cy * g + cx;
      for (let j = start[c]; j < start[c + 1]; j++) {
        const i = items[j];
        const dx = xy[2 * i] - x;
        const dy = xy[2 * i + 1] - y;
        const d = dx * dx + dy * dy;
        if (d <= bestD) {
          bestD = d;
          best = i;
        }
      }
    }
  }
  return best;
}

// Box and lasso selection with the rules Python applies to the same region
// (conceptlens/views/clusters.py: region_text, parse_region, points_in_polygon), so the
// points lit here are the images the page lists.

const LASSO_VERTICES = 80; // region_text's max_vertices

// Python's f"{v:.6g}" / f"{v:.5g}" as a number.
function round(v, digits) {
  return Number(Number(v).toPrecision(digits));
}

// A box from two corners (data coordinates): {kind, x: [x0, x1], y: [y0, y1]}, as the URL keeps it.
export function boxRegion(pts) {
  const xs = pts.map((p) => p[0]);
  const ys = pts.map((p) => p[1]);
  const x0 = round(Math.min(...xs), 6);
  const x1 = round(Math.max(...xs), 6);
  const y0 = round(Math.min(...ys), 6);
  const y1 = round(Math.max(...ys), 6);
  if (!(x0 < x1 && y0 < y1)) return null;
  return { kind: "box", x: [x0, x1], y: [y0, y1] };
}

// A lasso path, every step-th vertex kept (at most 80), 5 significant digits.
export function lassoRegion(pts) {
  const step = Math.max(1, Math.ceil(pts.length / LASSO_VERTICES));
  const x = [];
  const y = [];
  for (let i = 0; i < pts.length; i += step) {
    x.push(round(pts[i][0], 5));
    y.push(round(pts[i][1], 5));
  }
  if (x.length < 3) return null;
  return { kind: "lasso", x, y };
}

// Points with x0 <= x <= x1 and y0 <= y <= y1 (SQL's BETWEEN); marks `mask`, returns the count.
export function pointsInBox(xy, n, xs, ys, mask) {
  const x0 = Math.min(...xs);
  const x1 = Math.max(...xs);
  const y0 = Math.min(...ys);
  const y1 = Math.max(...ys);
  let count = 0;
  for (let i = 0; i < n; i++) {
    const x = xy[2 * i];
    const y = xy[2 * i + 1];
    if (x >= x0 && x <= x1 && y >= y0 && y <= y1) {
      mask[i] = 1;
      count++;
    }
  }
  return count;
}

// Even-odd rule inside the closed polygon (xs, ys), within its bounding box (as Python does).
export function pointsInPolygon(xy, n, px, py, mask) {
  const m = px.length;
  const bx0 = Math.min(...px);
  const bx1 = Math.max(...px);
  const by0 = Math.min(...py);
  const by1 = Math.max(...py);
  let count = 0;
  for (let i = 0; i < n; i++) {
    const x = xy[2 * i];
    const y = xy[2 * i + 1];
    if (x < bx0 || x > bx1 || y < by0 || y > by1) continue;
    let inside = false;
    for (let a = 0, b = m - 1; a < m; b = a++) {
      if (py[a] > y !== py[b] > y) {
        const at = ((px[b] - px[a]) * (y - py[a])) / (py[b] - py[a]) + px[a];
        if (x < at) inside = !inside;
      }
    }
    if (inside) {
      mask[i] = 1;
      count++;
    }
  }
  return count;
}

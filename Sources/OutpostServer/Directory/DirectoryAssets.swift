/// The Services Directory's style sheet and page script, served by the server itself
/// (`/arcgis/rest/static/…`): the pages load nothing from anywhere else, and their
/// Content-Security-Policy allows only these.
enum DirectoryAssets {
    static func named(_ name: String) -> (text: String, contentType: String)? {
        switch name {
        case "directory.css": (css, "text/css; charset=utf-8")
        case "directory.js": (script, "text/javascript; charset=utf-8")
        case "favicon.svg": (icon, "image/svg+xml")
        default: nil
        }
    }

    /// A map pin, for the browser tab.
    static let icon = """
        <svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 32 32"><path d="M16 2a10 10 0 0 0-10 10c0 7.5 10 18 10 18s10-10.5 10-18A10 10 0 0 0 16 2z" \
        fill="#20394d"/><circle cx="16" cy="12" r="4" fill="#fff"/></svg>

        """

    static let css = """
        body { font: 15px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; margin: 0; color: #1d2a33; background: #fafbfc; }
        header { background: #20394d; color: #fff; padding: 0.6em 1.2em; }
        header a { color: #fff; }
        header .home { font-weight: 600; text-decoration: none; margin-right: 1.5em; }
        .crumbs { display: inline; font-size: 0.92em; }
        main { padding: 0.5em 1.2em 2em; max-width: 72em; }
        h1 { font-size: 1.5em; margin: 0.6em 0; }
        h2 { font-size: 1.15em; margin-top: 1.6em; border-bottom: 1px solid #d7dee4; }
        h3 { font-size: 1em; }
        table { border-collapse: collapse; margin: 0.4em 0; }
        th, td { text-align: left; padding: 0.2em 0.7em 0.2em 0; vertical-align: top; }
        table.list th { border-bottom: 1px solid #c3ccd4; }
        table.list td { border-bottom: 1px solid #eef1f3; }
        table.properties th { font-weight: 600; white-space: nowrap; }
        table.features td { font-size: 0.9em; max-width: 22em; overflow-wrap: anywhere; }
        pre.json { background: #f0f3f5; padding: 0.8em; overflow: auto; max-height: 32em; font-size: 0.85em; }
        .note { color: #5b6b77; font-size: 0.9em; }
        .error { color: #9b1c1c; font-weight: 600; }
        form.operation .field { margin: 0.35em 0; }
        form.operation label { display: inline-block; min-width: 12em; font-weight: 600; vertical-align: top; }
        form.operation input { width: 30em; max-width: 90%; }
        form.operation textarea { width: 40em; max-width: 90%; font-family: monospace; }
        form.operation button { margin-top: 0.6em; padding: 0.3em 1.2em; }
        ul.links { padding-left: 1.2em; }
        .map { position: relative; width: 640px; max-width: 100%; height: 400px; overflow: hidden; background: #dfe7ec;
               border: 1px solid #b9c5ce; cursor: grab; touch-action: none; user-select: none; }
        .map img { position: absolute; width: 256px; height: 256px; pointer-events: none; }
        .map canvas { position: absolute; pointer-events: none; }
        .map .zoom { position: absolute; top: 8px; left: 8px; z-index: 2; display: flex; flex-direction: column; }
        .map .zoom button { width: 28px; height: 28px; margin-bottom: 2px; font-size: 18px; line-height: 1; cursor: pointer; }
        .map .level { position: absolute; bottom: 4px; right: 6px; z-index: 2; font-size: 12px; background: rgba(255,255,255,0.75); padding: 0 4px; }

        """

    /// Draws a tiled map service's tiles into `#map` (a VectorTileServer's decoded and drawn into
    /// canvases): the initial extent at the finest level that shows it whole, dragging to pan,
    /// buttons and the wheel to zoom.
    static let script = """
        "use strict";
        (function () {
          const map = document.getElementById("map");
          if (!map) { return; }
          const data = map.dataset;
          const size = Number(data.tileSize) || 256;
          const origin = data.origin.split(",").map(Number);
          const resolution0 = Number(data.resolution0);
          const minLevel = Number(data.minLevel), maxLevel = Number(data.maxLevel);
          const extent = data.extent ? data.extent.split(",").map(Number) : null;
          const width = () => map.clientWidth, height = () => map.clientHeight;
          const resolution = (level) => resolution0 / Math.pow(2, level);
          let level = minLevel;
          let center = extent ? [(extent[0] + extent[2]) / 2, (extent[1] + extent[3]) / 2] : [0, 0];
          if (extent) {
            for (let l = minLevel; l <= maxLevel; l++) {
              if ((extent[2] - extent[0]) / resolution(l) <= width() && (extent[3] - extent[1]) / resolution(l) <= height()) { level = l; }
            }
          }
          const layer = document.createElement("div");
          map.appendChild(layer);
          const label = document.createElement("div");
          label.className = "level";
          map.appendChild(label);
          function draw() {
            const r = resolution(level), span = r * size;
            const left = center[0] - width() / 2 * r, top = center[1] + height() / 2 * r;
            const c0 = Math.floor((left - origin[0]) / span), c1 = Math.floor((left + width() * r - origin[0]) / span);
            const r0 = Math.floor((origin[1] - top) / span), r1 = Math.floor((origin[1] - (top - height() * r)) / span);
            const count = Math.pow(2, level);
            layer.replaceChildren();
            for (let row = Math.max(r0, 0); row <= Math.min(r1, count - 1); row++) {
              for (let col = Math.max(c0, 0); col <= Math.min(c1, count - 1); col++) {
                const tile = data.vector ? vectorTile(level, row, col) : document.createElement("img");
                if (!data.vector) {
                  tile.alt = "";
                  tile.src = data.tiles + "/" + level + "/" + row + "/" + col;
                  tile.addEventListener("error", () => { tile.remove(); });
                }
                tile.style.left = Math.round((origin[0] + col * span - left) / r) + "px";
                tile.style.top = Math.round((top - (origin[1] - row * span)) / r) + "px";
                layer.appendChild(tile);
              }
            }
            label.textContent = "level " + level;
          }
          // Mapbox Vector Tiles: read with a small protobuf reader, drawn into a canvas per tile
          // (areas filled, lines stroked, points as dots; a colour per layer).
          const palette = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf"];
          function decode(bytes) {
            const layers = [];
            const varint = (r) => { let v = 0, s = 1, x; do { x = bytes[r.p++]; v += (x & 0x7f) * s; s *= 128; } while (x & 0x80); return v; };
            const skip = (r, wire) => {
              if (wire === 0) { varint(r); } else if (wire === 2) { const n = varint(r); r.p += n; }
              else if (wire === 1) { r.p += 8; } else if (wire === 5) { r.p += 4; } else { throw new Error("wire type " + wire); }
            };
            const fields = (r, each) => { while (r.p < r.end) { const key = varint(r); if (!each(Math.floor(key / 8), key & 7, r)) { skip(r, key & 7); } } };
            const part = (r) => { const n = varint(r); const inner = { p: r.p, end: r.p + n }; r.p += n; return inner; };
            fields({ p: 0, end: bytes.length }, (field, wire, r) => {
              if (field !== 3 || wire !== 2) { return false; }
              const layer = { name: "", extent: 4096, features: [] };
              fields(part(r), (f, w, q) => {
                if (f === 1 && w === 2) { const s = part(q); layer.name = new TextDecoder().decode(bytes.subarray(s.p, s.end)); return true; }
                if (f === 5 && w === 0) { layer.extent = varint(q); return true; }
                if (f !== 2 || w !== 2) { return false; }
                const feature = { type: 0, geometry: [] };
                fields(part(q), (g, gw, t) => {
                  if (g === 3 && gw === 0) { feature.type = varint(t); return true; }
                  if (g === 4 && gw === 2) { const s = part(t); while (s.p < s.end) { feature.geometry.push(varint(s)); } t.p = s.end; return true; }
                  return false;
                });
                layer.features.push(feature);
                return true;
              });
              layers.push(layer);
              return true;
            });
            return layers;
          }
          function rings(geometry) {
            const out = []; let x = 0, y = 0, i = 0, ring = null;
            const zigzag = (v) => (v % 2 === 1 ? -(v + 1) / 2 : v / 2);
            while (i < geometry.length) {
              const command = geometry[i++], id = command & 7, count = Math.floor(command / 8);
              if (id === 1 || id === 2) {
                for (let k = 0; k < count; k++) {
                  x += zigzag(geometry[i++]); y += zigzag(geometry[i++]);
                  if (id === 1) { ring = [[x, y]]; out.push(ring); } else { ring.push([x, y]); }
                }
              }
            }
            return out;
          }
          function vectorTile(z, row, col) {
            const canvas = document.createElement("canvas");
            canvas.width = size; canvas.height = size;
            canvas.style.width = size + "px"; canvas.style.height = size + "px";
            fetch(data.tiles + "/" + z + "/" + row + "/" + col + ".pbf").then((reply) => reply.ok ? reply.arrayBuffer() : null).then((buffer) => {
              if (!buffer) { canvas.remove(); return; }
              const g = canvas.getContext("2d");
              decode(new Uint8Array(buffer)).forEach((layer, index) => {
                const k = size / layer.extent, colour = palette[index % palette.length];
                g.strokeStyle = colour; g.fillStyle = colour; g.lineWidth = 1.5;
                for (const feature of layer.features) {
                  const parts = rings(feature.geometry);
                  g.beginPath();
                  for (const part of parts) {
                    if (feature.type === 1) { for (const [px, py] of part) { g.moveTo(px * k + 3, py * k); g.arc(px * k, py * k, 3, 0, 2 * Math.PI); } continue; }
                    part.forEach(([px, py], n) => (n === 0 ? g.moveTo(px * k, py * k) : g.lineTo(px * k, py * k)));
                    if (feature.type === 3) { g.closePath(); }
                  }
                  if (feature.type === 3) { g.globalAlpha = 0.43; g.fill(); g.globalAlpha = 1; g.stroke(); }
                  else if (feature.type === 1) { g.fill(); } else { g.stroke(); }
                }
              });
            }).catch(() => canvas.remove());
            return canvas;
          }
          function zoom(by) {
            const next = Math.min(maxLevel, Math.max(minLevel, level + by));
            if (next !== level) { level = next; draw(); }
          }
          const buttons = document.createElement("div");
          buttons.className = "zoom";
          for (const [text, by] of [["+", 1], ["\\u2212", -1]]) {
            const button = document.createElement("button");
            button.type = "button";
            button.textContent = text;
            button.addEventListener("click", (event) => { event.stopPropagation(); zoom(by); });
            buttons.appendChild(button);
          }
          map.appendChild(buttons);
          let drag = null;
          map.addEventListener("pointerdown", (event) => { drag = [event.clientX, event.clientY]; map.setPointerCapture(event.pointerId); });
          map.addEventListener("pointermove", (event) => {
            if (!drag) { return; }
            const r = resolution(level);
            center = [center[0] - (event.clientX - drag[0]) * r, center[1] + (event.clientY - drag[1]) * r];
            drag = [event.clientX, event.clientY];
            draw();
          });
          map.addEventListener("pointerup", () => { drag = null; });
          map.addEventListener("wheel", (event) => { event.preventDefault(); zoom(event.deltaY < 0 ? 1 : -1); }, { passive: false });
          draw();
        })();

        """
}

// babblerctl web's page: draws what /events sends (babbler/live/web.py). Every value from
// the wire (a node's name above all) is set as text (textContent, SVG text nodes), never as
// markup: a peer may name itself anything printable.
"use strict";

const SVG = "http://www.w3.org/2000/svg";
const WIDTH = 800, HEIGHT = 640, RADIUS = 230, NODE_R = 26;
const NAME_SHOWN = 32;  // characters of a name drawn; the details show it whole
const END_SHOWN = 12;   // ... and in a cable's rate labels, which name both ends

let latest = null;      // the last payload: {mesh, log, error, socket}
let selected = null;    // the node id whose details are shown

function make(ns, tag, attrs, text) {
  const el = ns ? document.createElementNS(ns, tag) : document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) el.setAttribute(k, String(v));
  if (text !== undefined && text !== null) el.textContent = String(text);
  return el;
}

function bits(bytesPerS) {
  if (bytesPerS === null || bytesPerS === undefined) return "–";
  const b = bytesPerS * 8;
  if (b >= 1e9) return (b / 1e9).toFixed(2) + " Gb/s";
  if (b >= 1e6) return (b / 1e6).toFixed(1) + " Mb/s";
  if (b >= 1e3) return (b / 1e3).toFixed(1) + " kb/s";
  return b.toFixed(0) + " b/s";
}

function speed(mbps) {
  if (mbps === null || mbps === undefined) return "speed ?";
  return mbps >= 1000 ? (mbps / 1000) + " Gb/s" : mbps + " Mb/s";
}

function label(node) {
  return node.name === null || node.name === undefined ? node.node_id : node.name;
}

function shortened(text, most = NAME_SHOWN) {
  return text.length > most ? text.slice(0, most - 1) + "…" : text;
}

function endName(end, byId) {
  const node = byId.get(end.node_id);
  return node ? label(node) : (end.name === null ? end.node_id : end.name);
}

// Where each node sits: a circle, this node on top, in the model's order.
function places(nodes) {
  const out = new Map();
  nodes.forEach((node, i) => {
    const angle = -Math.PI / 2 + (2 * Math.PI * i) / Math.max(nodes.length, 1);
    const r = nodes.length === 1 ? 0 : RADIUS;
    out.set(node.node_id, {x: WIDTH / 2 + r * Math.cos(angle), y: HEIGHT / 2 + r * Math.sin(angle)});
  });
  return out;
}

function thickness(cable) {
  const b = ((cable.a_to_b || 0) + (cable.b_to_a || 0)) * 8;
  return 2 + Math.min(10, Math.log10(1 + b / 1e3) * 1.5);
}

function drawCables(svg, mesh, at, byId) {
  const seen = new Map();  // node pair -> cables drawn so far (parallel cables fan out)
  for (const cable of mesh.cables) {
    const p = at.get(cable.a.node_id), q = at.get(cable.b.node_id);
    if (!p || !q) continue;
    const pair = cable.a.node_id + " " + cable.b.node_id;
    const k = seen.get(pair) || 0;
    seen.set(pair, k + 1);
    const dx = q.x - p.x, dy = q.y - p.y, len = Math.hypot(dx, dy) || 1;
    const off = (k % 2 ? -1 : 1) * Math.ceil(k / 2) * 16;  // 0, 16, -16, 32, ...
    const ox = (-dy / len) * off, oy = (dx / len) * off;
    const g = make(SVG, "g", {
      class: "cable", "data-a": cable.a.node_id, "data-b": cable.b.node_id,
      "data-a-interface": cable.a.interface, "data-b-interface": cable.b.interface,
      "data-a-to-b": cable.a_to_b === null ? "" : cable.a_to_b,
      "data-b-to-a": cable.b_to_a === null ? "" : cable.b_to_a,
    });
    g.append(make(SVG, "line", {
      x1: p.x + ox, y1: p.y + oy, x2: q.x + ox, y2: q.y + oy, "stroke-width": thickness(cable),
    }));
    const mx = (p.x + q.x) / 2 + ox, my = (p.y + q.y) / 2 + oy;
    const a = endName(cable.a, byId), b = endName(cable.b, byId);
    g.append(make(SVG, "text", {x: mx, y: my - 16, "text-anchor": "middle", class: "speed"},
                  speed(cable.speed_mbps) + (cable.mtu ? " · MTU " + cable.mtu : "")));
    const way = (from, to, rate) =>
      shortened(from, END_SHOWN) + " → " + shortened(to, END_SHOWN) + "  " + bits(rate);
    g.append(make(SVG, "text", {x: mx, y: my, "text-anchor": "middle", class: "rate a-to-b"},
                  way(a, b, cable.a_to_b)));
    g.append(make(SVG, "text", {x: mx, y: my + 15, "text-anchor": "middle", class: "rate b-to-a"},
                  way(b, a, cable.b_to_a)));
    g.append(make(SVG, "title", {},
                  a + " " + cable.a.interface + " – " + b + " " + cable.b.interface));
    svg.append(g);
  }
}

function drawNodes(svg, mesh, at) {
  for (const node of mesh.nodes) {
    const p = at.get(node.node_id);
    const classes = ["node", node.state];
    if (node.node_id === selected) classes.push("selected");
    const g = make(SVG, "g", {
      class: classes.join(" "), "data-node-id": node.node_id, "data-state": node.state,
      tabindex: 0,
    });
    g.append(make(SVG, "circle", {cx: p.x, cy: p.y, r: NODE_R}));
    g.append(make(SVG, "text", {x: p.x, y: p.y + NODE_R + 18, class: "name"},
                  shortened(label(node))));
    const tag = node.state === "me" ? "this node" : node.state === "down" ? "(down)"
      : node.hops === null ? "" : node.hops + (node.hops === 1 ? " hop" : " hops");
    g.append(make(SVG, "text", {x: p.x, y: p.y + NODE_R + 34, class: "tag"}, tag));
    g.append(make(SVG, "title", {}, label(node)));
    g.addEventListener("click", () => select(node.node_id));
    g.addEventListener("keydown", (e) => { if (e.key === "Enter") select(node.node_id); });
    svg.append(g);
  }
}

function row(dl, term, value) {
  dl.append(make(null, "dt", {}, term), make(null, "dd", {}, value));
}

function seconds(s) {
  if (s === null || s === undefined) return "–";
  return s < 120 ? s.toFixed(1) + " s ago" : Math.round(s / 60) + " min ago";
}

function showDetails() {
  const box = document.getElementById("details");
  const mesh = latest && latest.mesh;
  const node = mesh && mesh.nodes.find((n) => n.node_id === selected);
  const children = [make(null, "h2", {}, "Node")];
  if (!node) {
    children.push(make(null, "p", {class: "hint"}, "Click a node."));
    box.replaceChildren(...children);
    return;
  }
  const byId = new Map(mesh.nodes.map((n) => [n.node_id, n]));
  const dl = make(null, "dl", {id: "node-details", "data-node-id": node.node_id});
  row(dl, "Name", node.name === null ? "(no info yet)" : node.name);
  row(dl, "Node id", node.node_id);
  row(dl, "State", node.state === "me" ? "this node" : node.state);
  row(dl, "Hops", node.hops === null ? "–" : node.hops);
  row(dl, "Address", node.address || "–");
  row(dl, "IPv4", node.address_v4 || "–");
  row(dl, "Version", node.version || "–");
  row(dl, "Info", node.state === "me" ? "–" : seconds(node.info_age_s));
  children.push(dl);
  const cables = mesh.cables.filter((c) => c.a.node_id === node.node_id || c.b.node_id === node.node_id);
  children.push(make(null, "h2", {}, "Cables"));
  const list = make(null, "ul", {id: "node-cables"});
  for (const c of cables) {
    const [here, there, out, back] = c.a.node_id === node.node_id
      ? [c.a, c.b, c.a_to_b, c.b_to_a] : [c.b, c.a, c.b_to_a, c.a_to_b];
    list.append(make(null, "li", {},
      here.interface + " to " + endName(there, byId) + " " + there.interface + ": " +
      speed(c.speed_mbps) + ", out " + bits(out) + ", in " + bits(back)));
  }
  if (!cables.length) list.append(make(null, "li", {}, "none known"));
  children.push(list);
  box.replaceChildren(...children);
}

function select(nodeId) {
  selected = nodeId;
  render();
}

function showLog(log) {
  const items = log.map((change) => {
    const li = make(null, "li", {"data-kind": change.kind});
    li.append(make(null, "time", {}, change.time), document.createTextNode(change.text));
    return li;
  });
  document.getElementById("log").replaceChildren(...items);
}

function render() {
  const svg = document.getElementById("mesh");
  const state = document.getElementById("state");
  if (!latest) return;
  state.classList.toggle("error", Boolean(latest.error));
  state.textContent = latest.error
    ? latest.error
    : "live from " + latest.socket + ", " + new Date().toTimeString().slice(0, 8);
  const mesh = latest.mesh;
  if (!mesh) { svg.replaceChildren(); return; }
  const me = mesh.nodes.find((n) => n.state === "me");
  document.getElementById("me").textContent = me ? "at " + label(me) : "";
  const at = places(mesh.nodes);
  const byId = new Map(mesh.nodes.map((n) => [n.node_id, n]));
  svg.replaceChildren();
  drawCables(svg, mesh, at, byId);
  drawNodes(svg, mesh, at);
  showDetails();
  showLog(latest.log);
}

function connect() {
  const source = new EventSource("/events");
  source.onmessage = (e) => { latest = JSON.parse(e.data); render(); };
  source.onerror = () => {
    const state = document.getElementById("state");
    state.classList.add("error");
    state.textContent = "babblerctl web is not answering; trying again";
  };
}

connect();

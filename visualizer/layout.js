// Lays out one chart with ELK (vendor/elk.bundled.js, run in the page so text is measured in the
// page's own font) and draws it as SVG. A classic script: it defines window.XcompactLayout.
//
// Every piece of text is an SVG <text class="xc-text"> of FONT px at zoom 1; the viewer never
// zooms out below MIN_FONT / FONT, so no label is drawn smaller than MIN_FONT px.
(function () {
  'use strict';

  const FONT = 13;
  const MIN_FONT = 11;
  const LINE = 16; // line height: a line's box (~1.17 × FONT) never reaches into the next one
  const FONT_FAMILY = '"DejaVu Sans", "Segoe UI", "Helvetica Neue", Arial, sans-serif';
  // px: longer labels wrap at word boundaries (each width is tried); the narrow ones keep a chart with
  // many guarded arrows (pressure, 17 states) legible in a 1600×1000 window: wide label blocks widen every layer.
  const WRAPS = [250, 190, 330, 140, 120];
  let WRAP = WRAPS[0];
  const FINALISTS = 4;
  const PAD = 6;
  const SVG_NS = 'http://www.w3.org/2000/svg';

  const canvas = document.createElement('canvas').getContext('2d');
  function textWidth(text, weight) {
    canvas.font = `${weight || 'normal'} ${FONT}px ${FONT_FAMILY}`;
    return canvas.measureText(text).width;
  }

  /** Splits text into lines no wider than WRAP (a single longer word keeps its own line). */
  function wrap(text, weight) {
    const words = text.split(' ');
    const lines = [];
    let line = '';
    for (const word of words) {
      const next = line === '' ? word : `${line} ${word}`;
      if (line !== '' && textWidth(next, weight) > WRAP) {
        lines.push(line);
        line = `  ${word}`; // a continued line is indented
      } else line = next;
    }
    if (line !== '') lines.push(line);
    return lines;
  }

  /** A text block: lines with the record each one stands for (a transition index, or null). */
  function block(items) {
    const lines = [];
    for (const item of items) {
      wrap(item.text, item.weight).forEach((text) => lines.push({ text: (item.indent ? '  ' : '') + text, t: item.t, kind: item.kind, weight: item.weight }));
    }
    const width = Math.ceil(Math.max(0, ...lines.map((l) => textWidth(l.text, l.weight))));
    return { lines, width, height: lines.length * LINE };
  }

  const internalText = (t) => `${t.label}${t.actions.length ? ` / ${t.actions.join(', ')}` : ''}`;

  /** The text drawn inside a state's box: its name, invoke/entry/exit notes, internal transitions. */
  function stateBlock(chart, state) {
    const items = [{ text: state.key, kind: 'title', weight: 'bold', t: null }];
    for (const note of state.notes) items.push({ text: note, kind: 'note', t: null });
    chart.graph.transitions.forEach((t, i) => {
      if (t.internal && t.source === state.id) items.push({ text: internalText(t), kind: 'internal', t: [i] });
    });
    return block(items);
  }

  /**
   * The lines of one arrow's label: a transition alone is `event [guard]`; several on the same
   * event are the event once, then a line per guard in the order XState tries them (`otherwise`
   * for the one without a guard, which is taken only when none before it held).
   */
  function edgeItems(chart, members) {
    const byEvent = new Map();
    for (const i of members) {
      const t = chart.graph.transitions[i];
      const head = t.guard === undefined ? t.label : t.label.slice(0, t.label.length - t.guard.length - 3);
      (byEvent.get(head) || byEvent.set(head, []).get(head)).push(i);
    }
    const items = [];
    for (const [head, list] of byEvent) {
      if (list.length === 1) {
        items.push({ text: chart.graph.transitions[list[0]].label, kind: 'edge', t: list });
        continue;
      }
      items.push({ text: head, kind: 'edge', t: list });
      for (const i of list) {
        const g = chart.graph.transitions[i].guard;
        items.push({ text: g === undefined ? 'otherwise' : `[${g}]`, kind: 'edge', t: [i], indent: true });
      }
    }
    return items;
  }

  function elkGraph(chart, direction, extra) {
    const byId = new Map(chart.graph.states.map((s) => [s.id, s]));
    const kids = new Map();
    for (const s of chart.graph.states) if (s.parent) (kids.get(s.parent) || kids.set(s.parent, []).get(s.parent)).push(s);
    const blocks = new Map();
    const ancestors = (id) => {
      const out = [];
      for (let s = byId.get(id); s; s = s.parent ? byId.get(s.parent) : undefined) out.push(s.id);
      return out;
    };

    const node = (state) => {
      const b = stateBlock(chart, state);
      blocks.set(state.id, b);
      const children = kids.get(state.id) || [];
      if (children.length === 0) return { id: state.id, width: b.width + 2 * PAD + 4, height: b.height + 2 * PAD };
      const inner = children.map(node);
      if (state.initial) inner.unshift({ id: `${state.id}#init`, width: 14, height: 14 });
      if (state.anyMarker) {
        const any = block([{ text: 'from any state', kind: 'marker', t: null }]);
        blocks.set(`${state.id}#any`, any);
        inner.push({ id: `${state.id}#any`, width: any.width + 2 * PAD, height: any.height + PAD });
      }
      return {
        id: state.id,
        children: inner,
        layoutOptions: {
          'elk.padding': `[top=${b.height + 2 * PAD},left=${PAD * 2},bottom=${PAD * 2},right=${PAD * 2}]`,
          'elk.nodeSize.constraints': 'MINIMUM_SIZE',
          'elk.nodeSize.minimum': `(${b.width + 4 * PAD}, ${b.height + 3 * PAD})`,
        },
        edges: [],
      };
    };
    const root = node(byId.get(chart.id));
    const containers = new Map();
    const index = (n) => {
      containers.set(n.id, n);
      (n.children || []).forEach(index);
    };
    index(root);

    // Initial arrows, then one arrow per (drawn source, target) with a line per transition.
    const edges = [];
    for (const s of chart.graph.states) if (s.initial) edges.push({ id: `init:${s.id}`, from: `${s.id}#init`, to: s.initial, container: s.id, lines: [] });
    const groups = new Map();
    chart.graph.transitions.forEach((t, i) => {
      if (t.internal) return;
      const from = t.fromAny ? `${t.source}#any` : t.source;
      const key = `${from}>${t.target}`;
      if (!groups.has(key)) {
        // The edge lives in the innermost compound that holds both ends (not in either end itself).
        const a = t.fromAny ? ancestors(t.source) : ancestors(t.source).slice(1);
        const b = new Set(ancestors(t.target).slice(1));
        const container = a.find((x) => b.has(x)) || chart.id;
        groups.set(key, { id: `e${groups.size}`, from, to: t.target, container, members: [] });
        edges.push(groups.get(key));
      }
      groups.get(key).members.push(i);
    });
    for (const g of groups.values()) g.items = edgeItems(chart, g.members);
    for (const e of edges) {
      const b = e.items ? block(e.items) : null;
      if (b) blocks.set(e.id, b);
      const owner = containers.get(e.container) || root;
      owner.edges = owner.edges || [];
      owner.edges.push({
        id: e.id,
        sources: [e.from],
        targets: [e.to],
        ...(b ? { labels: [{ id: `${e.id}:label`, text: b.lines.map((l) => l.text).join('\n'), width: b.width + 6, height: b.height + 2 }] } : {}),
      });
      e.block = b;
    }
    root.layoutOptions = {
      ...root.layoutOptions,
      'elk.algorithm': 'layered',
      'elk.direction': direction,
      'elk.hierarchyHandling': 'INCLUDE_CHILDREN',
      'elk.edgeRouting': 'ORTHOGONAL',
      'elk.layered.spacing.nodeNodeBetweenLayers': '16',
      'elk.layered.spacing.edgeNodeBetweenLayers': '10',
      'elk.layered.spacing.edgeEdgeBetweenLayers': '8',
      'elk.spacing.nodeNode': '16',
      'elk.spacing.edgeNode': '10',
      'elk.spacing.edgeEdge': '8',
      'elk.spacing.edgeLabel': '4',
      'elk.spacing.componentComponent': '28',
      'elk.edgeLabels.placement': 'CENTER',
      'elk.layered.edgeLabels.sideSelection': 'SMART_DOWN',
      'elk.layered.nodePlacement.strategy': 'NETWORK_SIMPLEX',
      'elk.layered.considerModelOrder.strategy': 'NODES_AND_EDGES',
      'elk.layered.compaction.postCompaction.strategy': 'EDGE_LENGTH', // pulls layers together: smaller, same order
      'elk.json.shapeCoords': 'ROOT',
      'elk.json.edgeCoords': 'ROOT',
      ...(extra || {}),
    };
    return { root, edges, blocks };
  }

  function el(name, attrs, parent) {
    const e = document.createElementNS(SVG_NS, name);
    for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, String(v));
    if (parent) parent.appendChild(e);
    return e;
  }

  function drawText(parent, b, x, y, cls) {
    const texts = [];
    b.lines.forEach((line, k) => {
      const text = el('text', { x, y: y + k * LINE + FONT, class: `xc-text xc-${line.kind} ${cls || ''}` }, parent);
      if (line.weight) text.setAttribute('font-weight', line.weight);
      if (line.t) text.dataset.t = line.t.join(' ');
      text.textContent = line.text;
      texts.push(text);
    });
    return texts;
  }

  /**
   * Lays the chart out a few ways (top-down or left-right, each arrow's label in the middle layer,
   * at its head or where it takes least room) and keeps the one that fits the box at the largest
   * scale, with labels wrapped at one of a few widths: the same chart and box always give the same drawing.
   * Two rounds: every way with ELK's default crossing minimization (7 passes), then the best
   * FINALISTS again with 40 passes (narrower layers for the larger charts), the better of each
   * pair kept. It picks the same drawing for all seven charts as 40 passes for every way did, in
   * 12.8 s of a page load instead of 14.1 s (one core, Chromium).
   */
  async function layout(chart, box) {
    const elk = new window.ELK();
    const attempt = async (way, thoroughness) => {
      WRAP = way.wrapAt;
      const g = elkGraph(chart, way.direction, {
        'elk.layered.edgeLabels.centerLabelPlacementStrategy': way.labels,
        'elk.layered.thoroughness': String(thoroughness),
      });
      const laid = await elk.layout(g.root);
      const scale = Math.min(box.width / laid.width, box.height / laid.height);
      return { ...g, laid, scale, way, direction: `${way.direction} ${way.labels} wrap ${way.wrapAt}` };
    };
    const first = [];
    for (const wrapAt of WRAPS) {
      for (const direction of ['DOWN', 'RIGHT']) {
        for (const labels of ['MEDIAN_LAYER', 'HEAD_LAYER', 'SPACE_EFFICIENT_LAYER']) first.push(await attempt({ wrapAt, direction, labels }, 7));
      }
    }
    // Stable: ties keep the order above.
    const finalists = first
      .map((r, i) => ({ r, i }))
      .sort((a, b) => b.r.scale - a.r.scale || a.i - b.i)
      .slice(0, FINALISTS);
    let best = null;
    for (const { r } of finalists) {
      for (const candidate of [r, await attempt(r.way, 40)]) {
        if (!best || candidate.scale > best.scale + 1e-9) best = candidate;
      }
    }
    WRAP = WRAPS[0];
    return best;
  }

  function draw(chart, result) {
    const { laid, edges, blocks } = result;
    const svg = el('svg', { class: 'xc-chart', 'font-family': FONT_FAMILY, 'font-size': FONT });
    const camera = el('g', { class: 'xc-camera' }, svg);
    const defs = el('defs', {}, svg);
    const marker = el(
      'marker',
      { id: `arrow-${chart.name}`, viewBox: '0 0 10 10', refX: 9, refY: 5, markerWidth: 8, markerHeight: 8, orient: 'auto-start-reverse' },
      defs,
    );
    el('path', { d: 'M0,0 L10,5 L0,10 z', class: 'xc-arrowhead' }, marker);
    const taken = el(
      'marker',
      { id: `arrow-taken-${chart.name}`, viewBox: '0 0 10 10', refX: 9, refY: 5, markerWidth: 8, markerHeight: 8, orient: 'auto-start-reverse' },
      defs,
    );
    el('path', { d: 'M0,0 L10,5 L0,10 z', class: 'xc-arrowhead-taken' }, taken);

    const byId = new Map(chart.graph.states.map((s) => [s.id, s]));
    const nodesLayer = el('g', { class: 'xc-nodes' }, camera);
    const edgesLayer = el('g', { class: 'xc-edges' }, camera);
    const labelsLayer = el('g', { class: 'xc-edge-labels' }, camera);
    chart.nodes = new Map();
    chart.lines = new Map(); // transition index → the elements that draw it
    const addLine = (i, e) => (chart.lines.get(i) || chart.lines.set(i, []).get(i)).push(e);

    const visit = (n) => {
      const state = byId.get(n.id);
      if (n.id.endsWith('#init')) {
        el('circle', { cx: n.x + n.width / 2, cy: n.y + n.height / 2, r: n.width / 2, class: 'xc-initial' }, nodesLayer);
      } else if (n.id.endsWith('#any')) {
        const g = el('g', { class: 'xc-any' }, nodesLayer);
        el('rect', { x: n.x, y: n.y, width: n.width, height: n.height, rx: n.height / 2, class: 'xc-any-box' }, g);
        drawText(g, blocks.get(n.id), n.x + PAD, n.y + PAD / 2);
      } else if (state) {
        const parent = state.parent ? byId.get(state.parent) : null;
        const region = parent && parent.type === 'parallel';
        const g = el('g', { class: `xc-state xc-${state.type}${region ? ' xc-region' : ''}` }, nodesLayer);
        g.dataset.state = state.id;
        el('rect', { x: n.x, y: n.y, width: n.width, height: n.height, rx: 8, class: 'xc-box' }, g);
        if (state.type === 'final') el('rect', { x: n.x + 3, y: n.y + 3, width: n.width - 6, height: n.height - 6, rx: 6, class: 'xc-final-ring' }, g);
        const texts = drawText(g, blocks.get(state.id), n.x + PAD + 2, n.y + PAD);
        for (const text of texts) for (const i of (text.dataset.t || '').split(' ').filter(Boolean)) addLine(Number(i), text);
        chart.nodes.set(state.id, g);
      }
      (n.children || []).forEach(visit);
    };
    visit(laid);

    const laidEdges = [];
    // ELK places an edge label only when it has text (the size is ours: measured in the page's font).
    const collect = (n) => {
      for (const e of n.edges || []) laidEdges.push({ e, dx: 0, dy: 0 });
      (n.children || []).forEach(collect);
    };
    collect(laid);
    const meta = new Map(edges.map((e) => [e.id, e]));
    for (const { e, dx, dy } of laidEdges) {
      const info = meta.get(e.id);
      const g = el('g', { class: 'xc-edge' }, edgesLayer);
      for (const section of e.sections || []) {
        const pts = [section.startPoint, ...(section.bendPoints || []), section.endPoint];
        const path = el(
          'path',
          { d: pts.map((p, k) => `${k ? 'L' : 'M'}${p.x},${p.y}`).join(' '), class: 'xc-path', 'marker-end': `url(#arrow-${chart.name})` },
          g,
        );
        path.dataset.edge = e.id;
        if (info.members) path.dataset.t = info.members.join(' ');
        if (info.members) for (const i of info.members) addLine(i, path);
      }
      for (const raw of e.labels || []) {
        const label = { ...raw, x: raw.x + dx, y: raw.y + dy };
        const lg = el('g', { class: 'xc-edge-label' }, labelsLayer);
        el('rect', { x: label.x, y: label.y, width: label.width, height: label.height, rx: 3, class: 'xc-label-bg' }, lg);
        for (const text of drawText(lg, info.block, label.x + 3, label.y + 1)) for (const i of text.dataset.t.split(' ')) addLine(Number(i), text);
      }
    }
    return { svg, camera, width: laid.width, height: laid.height };
  }

  async function sizes(chart, extra) {
    const elk = new window.ELK();
    const out = {};
    for (const direction of ['DOWN', 'RIGHT']) {
      const laid = await elk.layout(elkGraph(chart, direction, extra).root);
      out[direction] = [Math.round(laid.width), Math.round(laid.height)];
    }
    return out;
  }

  window.XcompactLayout = { layout, draw, sizes, FONT, MIN_FONT };
})();

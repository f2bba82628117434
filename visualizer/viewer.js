// The offline chart viewer: lays out out/machines.js with the vendored ELK (layout.js) and replays
// traces recorded by createTraceRecorder() (src/trace.ts). A classic script, not a module:
// pages opened from file:// may not load modules or fetch files, but may load scripts.
(function () {
  'use strict';

  const $ = (id) => document.getElementById(id);
  const charts = window.XCOMPACT_CHARTS || [];
  const chartById = new Map();
  let trace = null;
  let stateSteps = []; // indices into trace.steps of the 'state' steps
  let pos = -1;

  function fail(message) {
    $('status').textContent = message;
    $('status').className = 'error';
    document.body.dataset.ready = 'error';
    throw new Error(message);
  }

  // ---------------------------------------------------------------------------
  // Charts: laid out by layout.js (ELK), drawn as SVG, zoomed and panned by a camera transform.

  async function renderCharts() {
    if (!window.XCOMPACT_CHARTS) fail('out/machines.js is missing: run `npm run visualize` in the repository.');
    if (!window.ELK || !window.XcompactLayout) fail('vendor/elk.bundled.js is missing: run `npm run visualize` (it copies ELK from node_modules).');
    const main = $('charts');
    for (const chart of charts) {
      const section = document.createElement('section');
      section.className = 'chart';
      section.dataset.chart = chart.name;
      section.innerHTML =
        '<div class="chart-head"><h2></h2><p class="meta"></p><p class="actor-state"></p>' +
        '<div class="zoom" role="group" aria-label="Zoom"><button type="button" data-zoom="out" title="Zoom out (-)">−</button>' +
        '<button type="button" data-zoom="fit" title="Fit (0)">Fit</button><button type="button" data-zoom="in" title="Zoom in (+)">+</button></div></div>' +
        '<div class="diagram" tabindex="0"></div>' +
        '<details class="legend" open><summary>Legend: guards, actions and invoked services</summary><div class="legend-body"></div></details>' +
        '<details><summary>Mermaid source</summary><pre></pre></details>';
      section.querySelector('h2').textContent = chart.name;
      section.querySelector('.meta').textContent = `${chart.source} · ${chart.states.length} states · ${chart.name}.stately.ts / .mmd in visualizer/out/`;
      section.querySelector('pre').textContent = chart.mermaid;
      fillLegend(chart, section.querySelector('.legend-body'));
      main.appendChild(section);

      const tab = document.createElement('button');
      tab.type = 'button';
      tab.textContent = chart.name;
      tab.dataset.chart = chart.name;
      tab.addEventListener('click', () => selectChart(chart.name));
      $('tabs').appendChild(tab);
      chart.section = section;
      chart.tab = tab;
      chart.pathToId = new Map(chart.states.map((s) => [s.path, s.id]));
      chartById.set(chart.id, chart);
    }
    // Lay out with every section shown (a hidden one has no size), then show the first. Until then
    // the drawings are invisible (their boxes kept): a chart drawn before the last one is laid out
    // would show at a fit its box no longer has once the other sections are hidden.
    for (const chart of charts) {
      const diagram = chart.section.querySelector('.diagram');
      diagram.style.visibility = 'hidden';
      const box = { width: diagram.clientWidth - 16, height: diagram.clientHeight - 16 };
      const result = await window.XcompactLayout.layout(chart, box);
      const drawn = window.XcompactLayout.draw(chart, result);
      diagram.appendChild(drawn.svg);
      chart.view = camera(chart, diagram, drawn);
      chart.section.dataset.direction = result.direction;
    }
    $('status').remove();
    const wanted = location.hash.slice(1);
    for (const chart of charts) chart.refit = true;
    selectChart(charts.some((c) => c.name === wanted) ? wanted : charts[0].name);
    for (const chart of charts) chart.section.querySelector('.diagram').style.visibility = '';
    document.body.dataset.ready = 'true';
  }

  function fillLegend(chart, body) {
    const groups = [
      ['Guards', chart.graph.legend.guards, 'a transition is taken only when its guard holds; the first that holds wins'],
      ['Actions', chart.graph.legend.actions, 'run when a transition is taken, or on entry / exit'],
      ['Invoked services', chart.graph.legend.actors, 'the work a state runs; its done / error events leave the state'],
    ];
    for (const [title, entries, hint] of groups) {
      const div = document.createElement('div');
      div.className = 'legend-group';
      div.innerHTML = '<h3></h3><p class="hint"></p><ul></ul>';
      div.querySelector('h3').textContent = `${title} (${entries.length})`;
      div.querySelector('.hint').textContent = hint;
      for (const e of entries) {
        const li = document.createElement('li');
        li.textContent = e.name;
        const n = document.createElement('span');
        n.className = 'uses';
        n.textContent = ` ×${e.uses}`;
        li.appendChild(n);
        div.querySelector('ul').appendChild(li);
      }
      body.appendChild(div);
    }
  }

  /** Zoom (wheel, +/−, buttons) and pan (drag, arrows with Shift); never below the smallest legible scale. */
  function camera(chart, diagram, drawn) {
    const { MIN_FONT, FONT } = window.XcompactLayout;
    const minScale = MIN_FONT / FONT;
    const svg = drawn.svg;
    const view = { x: 0, y: 0, scale: 1 };
    const apply = () => {
      drawn.camera.setAttribute('transform', `translate(${view.x},${view.y}) scale(${view.scale})`);
      chart.section.dataset.scale = view.scale.toFixed(3);
    };
    const size = () => ({ w: diagram.clientWidth, h: diagram.clientHeight });
    const fit = () => {
      const { w, h } = size();
      view.scale = Math.max(minScale, Math.min(1.4, (w - 16) / drawn.width, (h - 16) / drawn.height));
      view.x = Math.max(8, (w - drawn.width * view.scale) / 2);
      view.y = Math.max(8, (h - drawn.height * view.scale) / 2);
      apply();
    };
    const zoom = (factor, cx, cy) => {
      const next = Math.max(minScale, Math.min(4, view.scale * factor));
      const { w, h } = size();
      const px = cx === undefined ? w / 2 : cx;
      const py = cy === undefined ? h / 2 : cy;
      view.x = px - ((px - view.x) * next) / view.scale;
      view.y = py - ((py - view.y) * next) / view.scale;
      view.scale = next;
      apply();
    };
    const pan = (dx, dy) => {
      view.x += dx;
      view.y += dy;
      apply();
    };
    svg.setAttribute('width', '100%');
    svg.setAttribute('height', '100%');
    diagram.addEventListener(
      'wheel',
      (e) => {
        e.preventDefault();
        const r = diagram.getBoundingClientRect();
        zoom(e.deltaY < 0 ? 1.15 : 1 / 1.15, e.clientX - r.left, e.clientY - r.top);
      },
      { passive: false },
    );
    let drag = null;
    diagram.addEventListener('pointerdown', (e) => {
      drag = { x: e.clientX, y: e.clientY };
      diagram.setPointerCapture(e.pointerId);
      diagram.classList.add('dragging');
    });
    diagram.addEventListener('pointermove', (e) => {
      if (!drag) return;
      pan(e.clientX - drag.x, e.clientY - drag.y);
      drag = { x: e.clientX, y: e.clientY };
    });
    const end = () => {
      drag = null;
      diagram.classList.remove('dragging');
    };
    diagram.addEventListener('pointerup', end);
    diagram.addEventListener('pointercancel', end);
    diagram.addEventListener('keydown', (e) => {
      if (e.key === '+' || e.key === '=') zoom(1.2);
      else if (e.key === '-') zoom(1 / 1.2);
      else if (e.key === '0') fit();
      else if (e.shiftKey && e.key.startsWith('Arrow')) {
        const d = 60;
        pan(e.key === 'ArrowLeft' ? d : e.key === 'ArrowRight' ? -d : 0, e.key === 'ArrowUp' ? d : e.key === 'ArrowDown' ? -d : 0);
      } else return;
      e.preventDefault();
      e.stopPropagation();
    });
    chart.section.querySelector('.zoom').addEventListener('click', (e) => {
      const which = e.target.dataset && e.target.dataset.zoom;
      if (which === 'in') zoom(1.25);
      else if (which === 'out') zoom(1 / 1.25);
      else if (which === 'fit') fit();
    });
    fit();
    return { fit, zoom, pan, get: () => ({ ...view }), minScale };
  }

  function selectChart(name) {
    for (const chart of charts) {
      if (!chart.section) continue;
      chart.section.hidden = chart.name !== name;
      chart.tab.classList.toggle('selected', chart.name === name);
      // A window resized while the chart was hidden: fit it to the new size once it shows.
      if (chart.name === name && chart.view && chart.refit) {
        chart.refit = false;
        chart.view.fit();
      }
    }
  }

  window.addEventListener('resize', () => {
    for (const chart of charts) {
      if (!chart.view) continue;
      if (chart.section.hidden) chart.refit = true;
      else chart.view.fit();
    }
  });

  /** The state node ids a state value makes active, the root included. */
  function activeStates(chart, value) {
    const out = [chart.pathToId.get('')];
    const walk = (path, v) => {
      if (typeof v === 'string') {
        out.push(chart.pathToId.get(path.concat(v).join('.')));
        return;
      }
      for (const [key, sub] of Object.entries(v)) {
        out.push(chart.pathToId.get(path.concat(key).join('.')));
        walk(path.concat(key), sub);
      }
    };
    walk([], value);
    return out.filter(Boolean);
  }

  function describeValue(value) {
    if (typeof value === 'string') return value;
    return Object.entries(value)
      .map(([k, v]) => `${k}: ${describeValue(v)}`)
      .join(', ');
  }

  // ---------------------------------------------------------------------------
  // Replay

  function loadTrace(data, origin) {
    stopFollow();
    showTrace(data, origin, 0);
  }

  /** Shows a trace; `at` is the chart step to show (clamped), -1 for the newest. */
  function showTrace(data, origin, at) {
    if (!data || data.format !== 'xcompact-trace' || !Array.isArray(data.steps)) {
      $('trace-info').textContent = `${origin} is not an xcompact trace (expected {"format":"xcompact-trace", …}).`;
      $('trace-info').className = 'hint error';
      return;
    }
    trace = data;
    stateSteps = [];
    data.steps.forEach((s, i) => s.kind === 'state' && stateSteps.push(i));
    const sessionCount = data.steps.length - stateSteps.length;
    $('trace-info').className = 'hint';
    $('trace-info').textContent = `${origin}: ${stateSteps.length} chart steps, ${sessionCount} session events, ${data.actors.length} actors.`;
    buildTimeline();
    document.body.dataset.traceSteps = String(stateSteps.length);
    goto(at < 0 ? stateSteps.length - 1 : at);
  }

  // ---------------------------------------------------------------------------
  // Follow: a live trace (src/trace.ts, `follow`) is a script of `xcompactTrace({...});` lines that
  // grows while the engine runs. A page from file:// may load scripts but not read files, so the
  // file is loaded again as a script every POLL_MS and what it holds replaces the trace shown.

  const POLL_MS = 400;
  let follow = null;

  function stopFollow() {
    if (follow) clearTimeout(follow.timer);
    follow = null;
    document.body.dataset.following = '';
  }

  function startFollow(src) {
    stopFollow();
    trace = null;
    follow = { src, polls: 0, timer: 0, seen: -1 };
    document.body.dataset.following = src;
    $('trace-info').className = 'hint';
    $('trace-info').textContent = `following ${src}: waiting for the file…`;
    poll(follow);
  }

  function poll(f) {
    if (follow !== f) return;
    const records = [];
    window.xcompactTrace = (record) => records.push(record);
    const script = document.createElement('script');
    script.src = `${f.src}${f.src.includes('?') ? '&' : '?'}poll=${++f.polls}`;
    const next = () => {
      script.remove();
      if (follow === f) f.timer = setTimeout(() => poll(f), POLL_MS);
    };
    script.onload = () => {
      if (follow === f) applyLive(f, records);
      next();
    };
    script.onerror = () => {
      if (follow === f && f.seen < 0) $('trace-info').textContent = `following ${f.src}: no such file yet (a path relative to index.html, or a file:// URL)`;
      next();
    };
    document.body.appendChild(script);
  }

  function applyLive(f, records) {
    const head = records[0];
    if (!head || head.format !== 'xcompact-trace') return;
    const steps = records.filter((r) => r.step).map((r) => r.step);
    if (steps.length === f.seen) return;
    const newest = $('follow-newest').checked || f.seen < 0;
    f.seen = steps.length;
    if (steps.length === 0) {
      $('trace-info').textContent = `following ${f.src}: started, no step yet`;
      return;
    }
    const data = { format: head.format, version: head.version, actors: records.filter((r) => r.actor).map((r) => r.actor), steps };
    showTrace(data, `following ${f.src}`, newest ? -1 : pos);
    document.body.dataset.followSteps = String(steps.length);
  }

  function actorLabel(id) {
    const a = trace.actors.find((x) => x.id === id);
    return a ? `${a.name === a.id ? 'root' : a.name} (${a.id})` : id;
  }

  function edgeFor(chart, t, target) {
    return chart.graph.transitions.findIndex(
      (e) => e.source === t.source && e.target === target && e.event === t.event && (e.guard || undefined) === (t.guard || undefined),
    );
  }

  function transitionText(chart, step) {
    if (step.transitions.length === 0) return step.cause === 'snapshot' ? 'started here' : '—';
    return step.transitions
      .map((t) => {
        const to = t.target.length ? t.target.join(', ') : '(stays)';
        const i = edgeFor(chart, t, t.target[0] || t.source);
        const label = i >= 0 ? chart.graph.transitions[i].label : t.event + (t.guard ? ` [${t.guard}]` : '');
        return `${t.source} → ${to} on ${label}`;
      })
      .join('; ');
  }

  function sessionText(s) {
    let text = `#${s.seq} ${s.type}`;
    if (s.surfaceOp === 'append') text += ' (appended to the surface)';
    if (s.surfaceOp === 'replace') text += ` (replaces surface span #${s.replaces[0]} … #${s.replaces[1]})`;
    return text;
  }

  function buildTimeline() {
    const ol = $('timeline');
    ol.textContent = '';
    // Room for the widest step number ("231."), which a fixed indent would clip.
    ol.style.paddingLeft = `calc(${String(trace.steps.length).length + 1}ch + 14px)`;
    trace.steps.forEach((s, i) => {
      const li = document.createElement('li');
      li.dataset.index = String(i);
      if (s.kind === 'state') {
        li.className = 'tl-state';
        li.textContent = `${s.machine}: ${describeValue(s.value)}${s.status === 'active' ? '' : ` (${s.status})`}`;
        li.addEventListener('click', () => goto(stateSteps.indexOf(i)));
      } else {
        li.className = 'tl-session';
        li.textContent = sessionText(s);
      }
      ol.appendChild(li);
    });
  }

  function goto(p) {
    if (!trace || stateSteps.length === 0) return;
    pos = Math.max(0, Math.min(stateSteps.length - 1, p));
    const index = stateSteps[pos];
    const step = trace.steps[index];

    // Each chart shows the latest state of the latest actor running it, up to this step.
    const latest = new Map();
    for (let k = 0; k <= index; k++) if (trace.steps[k].kind === 'state') latest.set(trace.steps[k].machine, trace.steps[k]);
    for (const chart of charts) {
      if (!chart.section) continue;
      chart.section.querySelectorAll('.xc-active').forEach((el) => el.classList.remove('xc-active'));
      chart.section.querySelectorAll('.xc-taken').forEach((el) => {
        el.classList.remove('xc-taken');
        if (el.tagName === 'path') el.setAttribute('marker-end', `url(#arrow-${chart.name})`);
      });
      const s = latest.get(chart.id);
      chart.section.classList.toggle('xc-current', s === step);
      chart.tab.classList.toggle('has-state', Boolean(s));
      chart.section.querySelector('.actor-state').textContent = s
        ? `${actorLabel(s.actor)}: ${describeValue(s.value)} · ${s.status}${s === step ? '' : ' (as of an earlier step)'}`
        : '';
      if (!s) continue;
      for (const id of activeStates(chart, s.value)) chart.nodes.get(id)?.classList.add('xc-active');
    }

    const chart = chartById.get(step.machine);
    if (chart) {
      for (const t of step.transitions) {
        for (const target of t.target.length ? t.target : [t.source]) {
          for (const el of chart.lines.get(edgeFor(chart, t, target)) || []) {
            el.classList.add('xc-taken');
            if (el.tagName === 'path') el.setAttribute('marker-end', `url(#arrow-taken-${chart.name})`);
          }
        }
      }
      selectChart(chart.name);
    }

    $('step-detail').hidden = false;
    $('step-machine').textContent = step.machine + (chart ? '' : ' (not a chart of this viewer: regenerate with npm run visualize)');
    $('step-actor').textContent = actorLabel(step.actor);
    $('step-event').textContent = step.event || '(eventless)';
    $('step-transition').textContent = chart ? transitionText(chart, step) : '';
    $('step-value').textContent = `${describeValue(step.value)} · ${step.status}`;

    const writes = $('step-writes');
    writes.textContent = '';
    const written = [];
    for (let k = index + 1; k < trace.steps.length && trace.steps[k].kind === 'session'; k++) written.push(k);
    for (const k of written) {
      const li = document.createElement('li');
      li.dataset.seq = String(trace.steps[k].seq);
      li.textContent = sessionText(trace.steps[k]);
      writes.appendChild(li);
    }
    if (written.length === 0) writes.innerHTML = '<li class="none">none</li>';

    for (const li of $('timeline').children) {
      const k = Number(li.dataset.index);
      li.classList.toggle('current', k === index);
      li.classList.toggle('written', written.includes(k));
    }
    const ol = $('timeline');
    const li = ol.children[index];
    // Scroll the timeline box only (scrollIntoView would also scroll the controls out of view).
    if (li.offsetTop < ol.scrollTop || li.offsetTop + li.offsetHeight > ol.scrollTop + ol.clientHeight) {
      ol.scrollTop = li.offsetTop - ol.clientHeight / 2;
    }
    $('step-counter').textContent = `Step ${pos + 1} / ${stateSteps.length}`;
    $('prev').disabled = pos === 0;
    $('next').disabled = pos === stateSteps.length - 1;
    document.body.dataset.step = String(pos);
  }

  function loadTraceScript(src) {
    window.XCOMPACT_TRACE = undefined;
    const script = document.createElement('script');
    script.src = src;
    script.onload = () => loadTrace(window.XCOMPACT_TRACE, src);
    script.onerror = () => {
      $('trace-info').textContent = `Could not load ${src} (a path relative to index.html, written by recorder.save('….js')).`;
      $('trace-info').className = 'hint error';
    };
    document.body.appendChild(script);
  }

  function readTraceFile(file) {
    const reader = new FileReader();
    reader.onload = () => {
      let text = String(reader.result).trim();
      // Also accept the script form that recorder.save('….js') writes.
      text = text.replace(/^(\/\/.*\n)*\s*window\.XCOMPACT_TRACE\s*=\s*/, '').replace(/;\s*$/, '');
      try {
        loadTrace(JSON.parse(text), file.name);
      } catch (err) {
        $('trace-info').textContent = `${file.name}: not JSON (${err.message})`;
        $('trace-info').className = 'hint error';
      }
    };
    reader.readAsText(file);
  }

  $('trace-file').addEventListener('change', (e) => e.target.files[0] && readTraceFile(e.target.files[0]));
  $('load-sample').addEventListener('click', () => loadTraceScript('out/sample-trace.js'));
  $('follow-form').addEventListener('submit', (e) => {
    e.preventDefault();
    const src = $('follow-path').value.trim();
    if (src) startFollow(src);
  });
  $('prev').addEventListener('click', () => goto(pos - 1));
  $('next').addEventListener('click', () => goto(pos + 1));
  document.addEventListener('keydown', (e) => {
    if (e.target instanceof HTMLInputElement) return;
    if (e.key === 'ArrowRight') goto(pos + 1);
    if (e.key === 'ArrowLeft') goto(pos - 1);
  });

  window.xcompactViewer = {
    loadTrace,
    goto,
    startFollow,
    stopFollow,
    activeStates: (name, value) =>
      activeStates(
        charts.find((c) => c.name === name),
        value,
      ),
    view: (name) => charts.find((c) => c.name === name).view,
  };

  renderCharts()
    .then(() => {
      const params = new URLSearchParams(location.search);
      if (params.get('follow')) {
        $('follow-path').value = params.get('follow');
        startFollow(params.get('follow'));
      } else if (params.get('trace')) loadTraceScript(params.get('trace'));
    })
    .catch((err) => {
      if (document.body.dataset.ready !== 'error') fail(`Rendering failed: ${err && err.message ? err.message : err}`);
    });
})();

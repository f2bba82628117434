/**
 * The offline viewer in a real browser: a Chromium found by test/helpers/chromium.ts
 * (XCOMPACT_CHROMIUM, Debian's, or the one inside the npm package @sparticuz/chromium, so a
 * machine with nothing installed via apt runs it too) driven by playwright-core. The page must
 * load from file:// with no other request, draw every chart with all of its states and
 * transitions legibly at 1600×1000 (judged from the page's own geometry), zoom and pan, replay a
 * recorded compaction highlighting the right states, and follow a trace while it is written.
 *
 * Screenshots of every chart go to test-artifacts/charts/; with XCOMPACT_SCREENSHOTS=visualizer/out
 * they are written there (the ones the docs show).
 */
import { appendFileSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AnyStateMachine, StateValue } from 'xstate';
import { liveTraceLine, type TraceSessionStep, type TraceStateStep } from '../../src/trace';
import { vendorAssets, visualizerDir } from '../../visualizer/export';
import { charts, stateNodes } from '../../visualizer/machines';
import { toViewerGraph } from '../../visualizer/graph';
import { recordSampleCompaction } from '../../visualizer/sample';
import { launchChromium } from '../helpers/chromium';

const ARTIFACTS = join(visualizerDir, '..', 'test-artifacts');
const VIEWER = pathToFileURL(join(visualizerDir, 'index.html')).href;

let browser: Browser;

beforeAll(async () => {
  vendorAssets(); // the viewer loads Mermaid from visualizer/vendor/, copied from node_modules
  mkdirSync(ARTIFACTS, { recursive: true });
  ({ browser } = await launchChromium());
  // The first use of the npm Chromium unpacks ~200 MB (~10 s idle, far more on a loaded machine).
});

afterAll(async () => {
  await (await shared?.catch(() => undefined))?.page.close();
  await browser?.close();
});

interface Opened {
  page: Page;
  requests: string[];
  errors: string[];
  atLoad: { drawnWhileLoading: boolean[]; shown: string; fit: string; visible: string };
}

async function openViewer(query = ''): Promise<Opened> {
  const page = await browser.newPage({ viewport: { width: 1600, height: 1000 } });
  // No action has a time limit of its own (the suite's hang guard is vitest's): a loaded machine only makes it slower.
  page.setDefaultTimeout(0);
  const requests: string[] = [];
  const errors: string[] = [];
  page.on('request', (r) => requests.push(r.url()));
  page.on('pageerror', (e) => errors.push(e.message));
  page.on('console', (m) => m.type() === 'error' && errors.push(m.text()));
  // Every drawing put into the page before it is ready: would it show there while the others are laid out?
  await page.addInitScript(() => {
    const seen: boolean[] = [];
    (window as unknown as { drawnWhileLoading: boolean[] }).drawnWhileLoading = seen;
    const append = Element.prototype.appendChild;
    Element.prototype.appendChild = function <T extends Node>(this: Element, child: T): T {
      if (child instanceof SVGSVGElement && document.body.dataset.ready === undefined) seen.push(getComputedStyle(this).visibility !== 'hidden');
      return append.call(this, child) as T;
    };
  });
  await page.goto(VIEWER + query);
  await page.waitForFunction(() => document.body.dataset.ready !== undefined, null, { timeout: 0 });
  const ready = await page.evaluate(() => document.body.dataset.ready);
  if (ready !== 'true') throw new Error(`the viewer failed: ${await page.textContent('#status')}`);
  // What the page showed the moment it was ready, before any test touched it.
  const atLoad = await page.evaluate(() => {
    // The chart shown: the first, or the one the trace's first step is in.
    const name = (document.querySelector('section[data-chart]:not([hidden])') as HTMLElement).dataset.chart!;
    const view = (window as unknown as { xcompactViewer: { view(n: string): { get(): unknown; fit(): void } } }).xcompactViewer.view(name);
    const shown = JSON.stringify(view.get());
    view.fit();
    return {
      drawnWhileLoading: (window as unknown as { drawnWhileLoading: boolean[] }).drawnWhileLoading,
      shown,
      fit: JSON.stringify(view.get()),
      visible: getComputedStyle(document.querySelector(`section[data-chart="${name}"] .diagram`)!).visibility,
    };
  });
  return { page, requests, errors, atLoad };
}

/**
 * The viewer opened with the committed sample trace, shared by the tests that only read it or
 * change what they put back: laying out every chart takes Chromium ~5 s of CPU a load, most of
 * this file's time. Opened by the first test that asks (so any one test still runs alone); its
 * requests and errors accumulate, so each test's checks of them cover every test before it on
 * this page too. A test that damages the drawing on purpose opens its own.
 */
// Each test may be the one that opens it (a page load: 15 s alone, 50 s beside a loaded suite
// on 2 cores), so each is given 240 s.
let shared: Promise<Opened> | undefined;
function sharedViewer(): Promise<Opened> {
  shared ??= openViewer('?trace=out/sample-trace.js');
  return shared;
}

/** The state nodes a value makes active, according to XState itself. */
function expectedActive(machine: AnyStateMachine, value: StateValue): string[] {
  const snapshot = machine.resolveState({ value, context: {} });
  return stateNodes(machine)
    .filter((n) => {
      if (n.path === '') return true;
      const keys = n.path.split('.');
      const partial = keys.slice(0, -1).reduceRight<StateValue>((inner, key) => ({ [key]: inner }), keys[keys.length - 1]!);
      return snapshot.matches(partial);
    })
    .map((n) => n.id)
    .sort();
}

const chartOf = (machineId: string) => charts.find((c) => c.machine.id === machineId)!;

const MIN_LABEL_PX = 11;
const SCREENSHOTS = join(visualizerDir, '..', process.env.XCOMPACT_SCREENSHOTS ?? 'test-artifacts/charts');

interface Rect {
  left: number;
  top: number;
  right: number;
  bottom: number;
}

interface Geometry {
  diagram: Rect;
  /** Every drawn text: its box, what it reads, and the box it belongs in (its state or its label's background). */
  labels: Array<{ r: Rect; text: string; owner: Rect | null }>;
  /** Where each arrow ends (its arrowhead). */
  heads: Array<{ x: number; y: number; edge: string }>;
  scale: number;
}

/** The shown chart's geometry, as the page lays it out (getBoundingClientRect of every label). */
function geometry(page: Page, name: string): Promise<Geometry> {
  return page.$eval(`section[data-chart="${name}"]`, (section) => {
    const box = (e: Element) => {
      const r = e.getBoundingClientRect();
      return { left: r.left, top: r.top, right: r.right, bottom: r.bottom };
    };
    const labels = Array.from(section.querySelectorAll('svg text')).map((t) => {
      const owner = t.parentElement?.querySelector(':scope > rect');
      return { r: box(t), text: t.textContent ?? '', owner: owner ? box(owner) : null };
    });
    const heads = Array.from(section.querySelectorAll('svg path.xc-path')).map((p) => {
      const path = p as SVGPathElement;
      const end = path.getPointAtLength(path.getTotalLength());
      const m = path.getScreenCTM()!;
      return { x: m.a * end.x + m.c * end.y + m.e, y: m.b * end.x + m.d * end.y + m.f, edge: path.dataset.edge ?? '' };
    });
    return { diagram: box(section.querySelector('.diagram')!), labels, heads, scale: Number((section as HTMLElement).dataset.scale) };
  });
}

const overlap = (a: Rect, b: Rect, slack = 0.5) => a.left < b.right - slack && b.left < a.right - slack && a.top < b.bottom - slack && b.top < a.bottom - slack;
const inside = (a: Rect, b: Rect, slack = 0.5) =>
  a.left >= b.left - slack && a.right <= b.right + slack && a.top >= b.top - slack && a.bottom <= b.bottom + slack;

/** What is wrong with a chart's drawing, in words (empty when it reads at a glance). */
function problems(g: Geometry): string[] {
  const out: string[] = [];
  for (const l of g.labels) {
    const h = l.r.bottom - l.r.top;
    if (h < MIN_LABEL_PX) out.push(`"${l.text}" is ${h.toFixed(1)} px high (< ${MIN_LABEL_PX})`);
    if (!inside(l.r, g.diagram)) out.push(`"${l.text}" is cut off by the diagram's edge`);
    if (l.owner && !inside(l.r, l.owner)) out.push(`"${l.text}" sticks out of its box`);
  }
  for (let i = 0; i < g.labels.length; i++) {
    for (let j = i + 1; j < g.labels.length; j++) {
      if (overlap(g.labels[i]!.r, g.labels[j]!.r)) out.push(`"${g.labels[i]!.text}" overlaps "${g.labels[j]!.text}"`);
    }
  }
  // Arrows into one state end apart, so each arrowhead can be told from the others.
  for (let i = 0; i < g.heads.length; i++) {
    for (let j = i + 1; j < g.heads.length; j++) {
      const [a, b] = [g.heads[i]!, g.heads[j]!];
      if (a.edge !== b.edge && Math.hypot(a.x - b.x, a.y - b.y) < 4) out.push(`arrows ${a.edge} and ${b.edge} end at one point`);
    }
  }
  return out;
}

describe('visualizer/index.html in Chromium', () => {
  it('loads from file:// with no other request and draws every chart with all of its states and transitions', async () => {
    const { page, requests, errors } = await sharedViewer();
    await page.waitForFunction(() => document.body.dataset.step === '0', null, { timeout: 0 });

    for (const { name, machine } of charts) {
      const drawn = await page.$$eval(`section[data-chart="${name}"] [data-state]`, (els) => els.map((e) => (e as HTMLElement).dataset.state!));
      const expected = stateNodes(machine).map((n) => n.id);
      expect(drawn.length, `${name}: drawn states`).toBe(expected.length);
      expect([...drawn].sort(), `${name}: each state drawn once`).toEqual([...expected].sort());
      const graph = toViewerGraph(machine);
      for (let i = 0; i < graph.transitions.length; i++) {
        const t = graph.transitions[i]!;
        const lines = await page.$$eval(`section[data-chart="${name}"] text[data-t~="${i}"]`, (els) => els.length);
        expect(lines, `${name}: ${t.label} (${t.source} → ${t.target}) is written on the chart`).toBeGreaterThan(0);
        const arrows = await page.$$eval(`section[data-chart="${name}"] path[data-t~="${i}"]`, (els) => els.length);
        // An internal transition is a line in its state's box; every other one has its arrow.
        expect(arrows, `${name}: ${t.label} (${t.source} → ${t.target}) has ${t.internal ? 'no' : 'its'} arrow`).toBe(t.internal ? 0 : 1);
      }
      const legend = await page.textContent(`section[data-chart="${name}"] .legend`);
      for (const guard of graph.legend.guards) expect(legend, `${name}: legend names guard ${guard.name}`).toContain(guard.name);
      for (const action of graph.legend.actions) expect(legend, `${name}: legend names action ${action.name}`).toContain(action.name);
    }

    expect(
      requests.filter((url) => !url.startsWith('file://')),
      'requests other than file://',
    ).toEqual([]);
    expect(requests.some((url) => url.endsWith('/vendor/elk.bundled.js'))).toBe(true);
    expect(errors).toEqual([]);
  });

  it('every chart reads at 1600×1000: labels at least 11 px, none overlapping, none cut off, arrowheads apart', async () => {
    const { page, errors } = await sharedViewer();
    mkdirSync(SCREENSHOTS, { recursive: true });
    const report: string[] = [];
    for (const { name } of charts) {
      await page.click(`#tabs button[data-chart="${name}"]`);
      expect(await page.isVisible(`section[data-chart="${name}"] .diagram svg`)).toBe(true);
      const g = await geometry(page, name);
      expect(g.labels.length, `${name}: labels found`).toBeGreaterThan(10);
      report.push(...problems(g).map((p) => `${name}: ${p}`));
      await page.screenshot({ path: join(SCREENSHOTS, `${name}.png`) });
    }
    expect(report).toEqual([]);
    expect(errors).toEqual([]);
  });

  it('the checks above catch a drawing that does not read (labels shrunk, moved onto each other)', async () => {
    const { page } = await sharedViewer();
    await page.click('#tabs button[data-chart="engine"]');
    await page.click('section[data-chart="engine"] [data-zoom="fit"]');
    expect(problems(await geometry(page, 'engine')), 'the drawing as laid out').toEqual([]);
    await page.$eval('section[data-chart="engine"] .xc-camera', (g) => g.setAttribute('transform', 'translate(0,0) scale(0.5)'));
    expect(problems(await geometry(page, 'engine')).some((p) => p.includes('px high'))).toBe(true);
    await page.$eval('section[data-chart="engine"] .xc-camera', (g) => g.setAttribute('transform', 'translate(0,0) scale(3)'));
    expect(problems(await geometry(page, 'engine')).some((p) => p.includes('cut off'))).toBe(true);
    const titles = await page.$$eval('section[data-chart="engine"] text.xc-title', (els) => els.map((e) => e.getAttribute('y')));
    await page.$$eval('section[data-chart="engine"] text.xc-title', (els) => els.forEach((e) => e.setAttribute('y', '40')));
    await page.click('section[data-chart="engine"] [data-zoom="fit"]');
    expect(problems(await geometry(page, 'engine')).some((p) => p.includes('overlaps'))).toBe(true);
    // Put back as it was (the page is shared): the same checks find nothing again.
    await page.$$eval(
      'section[data-chart="engine"] text.xc-title',
      (els, ys) => els.forEach((e, i) => (ys[i] === null ? e.removeAttribute('y') : e.setAttribute('y', ys[i]!))),
      titles,
    );
    await page.click('section[data-chart="engine"] [data-zoom="fit"]');
    expect(problems(await geometry(page, 'engine')), 'the drawing put back').toEqual([]);
  });

  it('zooms and pans, never below the legible size, and fits again', async () => {
    const { page, errors } = await sharedViewer();
    await page.click('#tabs button[data-chart="pressure"]');
    const scale = () => page.$eval('section[data-chart="pressure"]', (s) => Number((s as HTMLElement).dataset.scale));
    const fitted = await scale();
    await page.click('section[data-chart="pressure"] [data-zoom="in"]');
    expect(await scale()).toBeGreaterThan(fitted);
    for (let i = 0; i < 10; i++) await page.click('section[data-chart="pressure"] [data-zoom="out"]');
    const smallest = await geometry(page, 'pressure');
    expect(Math.min(...smallest.labels.map((l) => l.r.bottom - l.r.top))).toBeGreaterThanOrEqual(MIN_LABEL_PX);
    await page.click('section[data-chart="pressure"] [data-zoom="fit"]');
    expect(await scale()).toBeCloseTo(fitted, 5);

    const title = 'section[data-chart="pressure"] g[data-state="pressure.measuring"] text.xc-title';
    const before = (await page.locator(title).boundingBox())!;
    const diagram = (await page.locator('section[data-chart="pressure"] .diagram').boundingBox())!;
    await page.mouse.move(diagram.x + 30, diagram.y + 30);
    await page.mouse.down();
    await page.mouse.move(diagram.x + 130, diagram.y + 80, { steps: 4 });
    await page.mouse.up();
    const after = (await page.locator(title).boundingBox())!;
    expect(after.x - before.x).toBeCloseTo(100, 0);
    expect(after.y - before.y).toBeCloseTo(50, 0);
    await page.mouse.move(diagram.x + 200, diagram.y + 200);
    await page.mouse.wheel(0, -300);
    await page.waitForFunction((f) => Number((document.querySelector('section[data-chart="pressure"]') as HTMLElement).dataset.scale) > f, fitted);

    // A smaller window: the chart is fitted again, still never below the legible size.
    await page.setViewportSize({ width: 1280, height: 800 });
    await page.waitForFunction((f) => Number((document.querySelector('section[data-chart="pressure"]') as HTMLElement).dataset.scale) < f, fitted);
    const small = await geometry(page, 'pressure');
    expect(Math.min(...small.labels.map((l) => l.r.bottom - l.r.top))).toBeGreaterThanOrEqual(MIN_LABEL_PX);
    expect(errors).toEqual([]);
    // Put back for the next test on the shared page: the full window, the chart fitted again.
    await page.setViewportSize({ width: 1600, height: 1000 });
    await page.waitForFunction((f) => Number((document.querySelector('section[data-chart="pressure"]') as HTMLElement).dataset.scale) >= f - 1e-9, fitted);
  });

  it('steps through a recorded compaction, highlighting the states of each step and the events it wrote', async () => {
    const { trace } = await recordSampleCompaction();
    const tracePath = join(ARTIFACTS, 'visualizer-trace.json');
    writeFileSync(tracePath, JSON.stringify(trace));
    const steps = trace.steps.filter((s): s is TraceStateStep => s.kind === 'state');
    expect(steps.length).toBeGreaterThan(20);

    const { page, requests, errors } = await sharedViewer();
    await page.setInputFiles('#trace-file', tracePath);
    await page.waitForFunction(() => document.body.dataset.step === '0', null, { timeout: 0 });
    expect(await page.textContent('#step-counter')).toBe(`Step 1 / ${steps.length}`);

    let screenshotTaken = false;
    for (let i = 0; i < steps.length; i++) {
      const step = steps[i]!;
      const { name, machine } = chartOf(step.machine);
      const where = `step ${i + 1} (${step.machine} ${JSON.stringify(step.value)})`;
      expect(await page.evaluate(() => document.body.dataset.step), where).toBe(String(i));
      expect(await page.isVisible(`section[data-chart="${name}"]`), `${where}: its chart is shown`).toBe(true);

      const highlighted = await page.$$eval(`section[data-chart="${name}"] .xc-active[data-state]`, (els) =>
        els.map((e) => (e as HTMLElement).dataset.state!).sort(),
      );
      expect(highlighted, `${where}: highlighted states`).toEqual(expectedActive(machine, step.value));

      if (step.cause === 'microstep') {
        const taken = await page.$$eval(`section[data-chart="${name}"] .xc-taken`, (els) => els.length);
        expect(taken, `${where}: the transition taken is highlighted`).toBeGreaterThan(0);
      }

      const index = trace.steps.indexOf(step);
      const written: number[] = [];
      for (let k = index + 1; k < trace.steps.length && trace.steps[k]!.kind === 'session'; k++) written.push((trace.steps[k] as TraceSessionStep).seq);
      const shown = await page.$$eval('#step-writes li[data-seq]', (els) => els.map((e) => Number((e as HTMLElement).dataset.seq)));
      expect(shown, `${where}: session events written`).toEqual(written);

      if (!screenshotTaken && step.machine === 'transaction' && step.value === 'committing') {
        expect(await page.textContent('#step-writes')).toContain('compaction/summary');
        await page.screenshot({ path: join(ARTIFACTS, 'visualizer.png') });
        screenshotTaken = true;
      }
      if (i < steps.length - 1) await page.click('#next');
    }
    expect(screenshotTaken, 'the trace reaches a committing transaction').toBe(true);
    expect(await page.isDisabled('#next')).toBe(true);

    await page.click('#prev');
    expect(await page.textContent('#step-counter')).toBe(`Step ${steps.length - 1} / ${steps.length}`);

    expect(requests.filter((url) => !url.startsWith('file://'))).toEqual([]);
    expect(errors).toEqual([]);
  });
});

describe('visualizer/index.html in Chromium: what a newcomer saw go wrong', () => {
  it('draws no chart before every chart is laid out, and shows the first one fitted to its box', async () => {
    // The shared page's own load, as it was the moment it was ready (openViewer): one load less
    // (laying out every chart is most of this file's time).
    const { atLoad } = await sharedViewer();
    expect(atLoad.drawnWhileLoading.length, 'every chart is drawn while the page loads').toBe(charts.length);
    expect(atLoad.drawnWhileLoading.filter(Boolean), 'a chart shown before the others were laid out').toEqual([]);
    expect(atLoad.shown).toBe(atLoad.fit);
    expect(atLoad.visible).toBe('visible');
  });

  it('the timeline shows step numbers of three digits and more whole ("231.", not "31.")', async () => {
    const { page } = await sharedViewer();
    const room = await page.evaluate(() => {
      const w = window as unknown as { XCOMPACT_TRACE: { steps: unknown[] }; xcompactViewer: { loadTrace(d: unknown, origin: string): void } };
      const base = w.XCOMPACT_TRACE;
      const steps: unknown[] = [];
      while (steps.length < 1200) steps.push(...base.steps);
      w.xcompactViewer.loadTrace({ ...base, steps }, 'a long trace');
      const ol = document.getElementById('timeline')!;
      const widest = `${ol.children.length}.`;
      const probe = document.createElement('span');
      probe.textContent = widest;
      probe.style.font = getComputedStyle(ol.children[ol.children.length - 1]!).font;
      probe.style.position = 'absolute';
      document.body.appendChild(probe);
      const width = probe.getBoundingClientRect().width;
      probe.remove();
      return { items: ol.children.length, widest, width, padding: parseFloat(getComputedStyle(ol).paddingLeft) };
    });
    expect(room.items).toBeGreaterThanOrEqual(1200);
    expect(room.widest.length).toBe(5);
    // The marker sits in the list's left padding, right-aligned with a small gap before the text.
    expect(room.padding, `${room.widest} is ${room.width.toFixed(1)} px wide`).toBeGreaterThanOrEqual(room.width + 4);
    // Put the sample back for the tests that share this page.
    await page.evaluate(() => {
      const w = window as unknown as { XCOMPACT_TRACE: unknown; xcompactViewer: { loadTrace(d: unknown, origin: string): void } };
      w.xcompactViewer.loadTrace(w.XCOMPACT_TRACE, 'out/sample-trace.js');
    });
  });

  it('follows a trace while it is written: each appended step shows up in the open page', async () => {
    const { trace } = await recordSampleCompaction();
    const dir = join(ARTIFACTS, 'follow');
    mkdirSync(dir, { recursive: true });
    const live = join(dir, 'trace.live.js');
    writeFileSync(live, liveTraceLine({ format: 'xcompact-trace', version: 1 }));
    // On the shared page, last (it leaves the page following), through the form: `?follow=` puts
    // its value in the same field and starts the same follow (visualizer/viewer.js), without one
    // more load of every chart.
    const { page, requests, errors } = await sharedViewer();
    await page.fill('#follow-path', pathToFileURL(live).href);
    await page.click('#follow-form button[type="submit"]');
    await page.waitForFunction(() => document.querySelector('#trace-info')?.textContent?.includes('no step yet'), null, { timeout: 0 });

    // The writer appends actors and steps in the order they happened, in bursts.
    const states = (n: number) => trace.steps.slice(0, n).filter((s): s is TraceStateStep => s.kind === 'state');
    let written = 0;
    let actors = 0;
    const append = (upTo: number) => {
      for (; written < upTo; written++) {
        const step = trace.steps[written]!;
        if (step.kind === 'state') {
          for (; actors < trace.actors.length && trace.actors.findIndex((a) => a.id === step.actor) >= actors; actors++) {
            appendFileSync(live, liveTraceLine({ actor: trace.actors[actors]! }));
          }
        }
        appendFileSync(live, liveTraceLine({ step }));
      }
    };
    for (const upTo of [Math.floor(trace.steps.length / 3), Math.floor((2 * trace.steps.length) / 3), trace.steps.length]) {
      append(upTo);
      await page.waitForFunction((n) => document.body.dataset.followSteps === String(n), upTo, { timeout: 0 });
      const shown = states(upTo);
      const newest = shown[shown.length - 1]!;
      expect(await page.textContent('#step-counter')).toBe(`Step ${shown.length} / ${shown.length}`);
      const { name, machine } = chartOf(newest.machine);
      expect(await page.isVisible(`section[data-chart="${name}"]`)).toBe(true);
      const highlighted = await page.$$eval(`section[data-chart="${name}"] .xc-active[data-state]`, (els) =>
        els.map((e) => (e as HTMLElement).dataset.state!).sort(),
      );
      expect(highlighted, `after ${upTo} steps: the newest step's states`).toEqual(expectedActive(machine, newest.value));
    }

    // Not following the newest step: the page keeps the step the reader is on while the file grows.
    await page.uncheck('#follow-newest');
    await page.click('#prev');
    const counter = await page.textContent('#step-counter');
    appendFileSync(live, liveTraceLine({ step: states(trace.steps.length)[0]! })); // one more chart step
    await page.waitForFunction((n) => document.body.dataset.followSteps === String(n), trace.steps.length + 1, { timeout: 0 });
    expect(await page.textContent('#step-counter')).toBe(counter!.replace(/\/ (\d+)$/, (_m, n: string) => `/ ${Number(n) + 1}`));

    expect(requests.filter((url) => !url.startsWith('file://'))).toEqual([]);
    expect(errors).toEqual([]);
  });
});

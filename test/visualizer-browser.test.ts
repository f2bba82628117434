/**
 * The offline viewer in a real browser: a Chromium found by test/helpers/chromium.ts
 * (XCOMPACT_CHROMIUM, Debian's, or the one inside the npm package @sparticuz/chromium, so a
 * machine with nothing installed via apt runs it too) driven by playwright-core. The page must
 * load from file:// with no other request, draw every chart with all of its states, and replay a
 * recorded compaction highlighting the right states.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AnyStateMachine, StateValue } from 'xstate';
import type { TraceSessionStep, TraceStateStep } from '../src/trace';
import { vendorAssets, visualizerDir } from '../visualizer/export';
import { charts, stateNodes } from '../visualizer/machines';
import { toMermaid } from '../visualizer/mermaid';
import { recordSampleCompaction } from '../visualizer/sample';
import { launchChromium } from './helpers/chromium';

const ARTIFACTS = join(visualizerDir, '..', 'test-artifacts');
const VIEWER = pathToFileURL(join(visualizerDir, 'index.html')).href;

let browser: Browser;

beforeAll(async () => {
  vendorAssets(); // the viewer loads Mermaid from visualizer/vendor/, copied from node_modules
  mkdirSync(ARTIFACTS, { recursive: true });
  ({ browser } = await launchChromium());
  // The first use of the npm Chromium unpacks ~200 MB (~10 s idle, far more on a loaded machine).
}, 240_000);

afterAll(async () => {
  await browser?.close();
});

interface Opened {
  page: Page;
  requests: string[];
  errors: string[];
}

async function openViewer(query = ''): Promise<Opened> {
  const page = await browser.newPage({ viewport: { width: 1600, height: 1000 } });
  const requests: string[] = [];
  const errors: string[] = [];
  page.on('request', (r) => requests.push(r.url()));
  page.on('pageerror', (e) => errors.push(e.message));
  page.on('console', (m) => m.type() === 'error' && errors.push(m.text()));
  await page.goto(VIEWER + query);
  await page.waitForFunction(() => document.body.dataset.ready !== undefined, null, { timeout: 60_000 });
  const ready = await page.evaluate(() => document.body.dataset.ready);
  if (ready !== 'true') throw new Error(`the viewer failed: ${await page.textContent('#status')}`);
  return { page, requests, errors };
}

/** The state nodes a value makes active, according to XState itself. */
function expectedActive(machine: AnyStateMachine, value: StateValue): string[] {
  const snapshot = machine.resolveState({ value, context: {} as never });
  return stateNodes(machine)
    .filter((n) => {
      if (n.path === '') return true;
      const keys = n.path.split('.');
      const partial = keys.slice(0, -1).reduceRight<StateValue>((inner, key) => ({ [key]: inner }), keys[keys.length - 1]!);
      return snapshot.matches(partial as never);
    })
    .map((n) => n.id)
    .sort();
}

const chartOf = (machineId: string) => charts.find((c) => c.machine.id === machineId)!;

describe('visualizer/index.html in Chromium', () => {
  it('loads from file:// with no other request and draws every chart with all of its states and transitions', async () => {
    const { page, requests, errors } = await openViewer('?trace=out/sample-trace.js');
    await page.waitForFunction(() => document.body.dataset.step === '0', null, { timeout: 10_000 });

    for (const { name, machine } of charts) {
      const drawn = await page.$$eval(`section[data-chart="${name}"] [data-state]`, (els) => els.map((e) => (e as HTMLElement).dataset.state!));
      const expected = stateNodes(machine).map((n) => n.id);
      expect(drawn.length, `${name}: drawn states`).toBe(expected.length);
      expect([...drawn].sort(), `${name}: each state drawn once`).toEqual([...expected].sort());
      const edges = await page.$$eval(`section[data-chart="${name}"] path[id^="mmd-${name}-edge"]`, (els) => els.length);
      expect(edges, `${name}: edges drawn`).toBe(toMermaid(machine).edges.length);
    }

    expect(requests.filter((url) => !url.startsWith('file://')), 'requests other than file://').toEqual([]);
    expect(requests.some((url) => url.endsWith('/vendor/mermaid.min.js'))).toBe(true);
    expect(errors).toEqual([]);
    await page.close();
  }, 90_000);

  it('steps through a recorded compaction, highlighting the states of each step and the events it wrote', async () => {
    const { trace } = await recordSampleCompaction();
    const tracePath = join(ARTIFACTS, 'visualizer-trace.json');
    writeFileSync(tracePath, JSON.stringify(trace));
    const steps = trace.steps.filter((s): s is TraceStateStep => s.kind === 'state');
    expect(steps.length).toBeGreaterThan(20);

    const { page, requests, errors } = await openViewer();
    await page.setInputFiles('#trace-file', tracePath);
    await page.waitForFunction(() => document.body.dataset.step === '0', null, { timeout: 10_000 });
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
        const taken = await page.$$eval(`section[data-chart="${name}"] path.xc-taken`, (els) => els.length);
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
    await page.close();
  }, 120_000);
});

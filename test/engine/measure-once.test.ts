/**
 * One measurement per below-threshold decision (docs/background.md): with background compaction on (the
 * default), the gate's reading is the one the pressure chart decides on — `afterStep()` under
 * the threshold asks the measure service once, not once for the gate and again for the chart.
 */
import { describe, expect, it } from 'vitest';
import { harness, openTurn, recordingSummarizer, SMALL_CONFIG } from '../helpers/engine';

function counted(config: Record<string, unknown>) {
  const phases: string[] = [];
  const h = harness({
    summarizer: recordingSummarizer(),
    config: { ...SMALL_CONFIG, ...config },
    // A measure service of its own turns the quick check off: every step goes through the charts.
    services: (d) => ({
      measure: (i) => {
        phases.push(i.phase);
        return d.measure(i);
      },
    }),
  });
  return { h, phases };
}

describe('afterStep below the threshold', () => {
  it('measures once with background compaction on (the gate hands its reading to the pressure chart)', async () => {
    const { h, phases } = counted({ background: true, economics: true });
    openTurn(h);
    const r = await h.step(0, 'ok');
    expect(r.status).toBe('below');
    expect(phases).toEqual(['initial']);
    h.engine.stop();
  });

  it('measures once in the foreground too', async () => {
    const { h, phases } = counted({ background: false });
    openTurn(h);
    expect((await h.step(0, 'ok')).status).toBe('below');
    expect(phases).toEqual(['initial']);
    h.engine.stop();
  });
});

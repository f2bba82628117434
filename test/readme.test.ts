/**
 * The README is part of the product: its config table must list exactly the fields the
 * schema accepts, and its defaults must be the ones parseConfig applies.
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { ConfigFieldsSchema, parseConfig } from '../src/services/config';

const readme = readFileSync(new URL('../README.md', import.meta.url), 'utf8');

function section(name: string): string {
  const start = readme.indexOf(`<!-- ${name}:start -->`);
  const end = readme.indexOf(`<!-- ${name}:end -->`);
  if (start < 0 || end < start) throw new Error(`README has no ${name} section`);
  return readme.slice(start, end);
}

function tableRows(): Array<{ field: string; def: string }> {
  return section('config-table')
    .split('\n')
    .filter((l) => l.startsWith('| `'))
    .map((l) => {
      const cells = l.split('|').map((c) => c.trim());
      return { field: cells[1]!.replaceAll('`', ''), def: cells[2]! };
    });
}

function schemaFields(): string[] {
  const out: string[] = [];
  for (const [key, schema] of Object.entries(ConfigFieldsSchema.shape)) {
    const inner = (schema as { unwrap?: () => { shape?: Record<string, unknown> } }).unwrap?.();
    if (inner?.shape && (key === 'prune' || key === 'circuitBreaker')) out.push(...Object.keys(inner.shape).map((k) => `${key}.${k}`));
    else out.push(key);
  }
  return out.sort();
}

describe('README', () => {
  it('documents every config field, and only those', () => {
    expect(tableRows().map((r) => r.field).sort()).toEqual(schemaFields());
  });

  it('states the defaults parseConfig applies', () => {
    const config = parseConfig({}) as unknown as Record<string, unknown>;
    const read = (path: string): unknown => path.split('.').reduce<unknown>((o, k) => (o as Record<string, unknown>)[k], config);
    for (const { field, def } of tableRows()) {
      const literal = /^`(.*)`$/.exec(def)?.[1];
      if (literal === undefined) continue; // described in words (derived per model)
      expect(JSON.stringify(read(field)), field).toBe(literal.startsWith("'") ? JSON.stringify(literal.slice(1, -1)) : literal);
    }
  });

  it('shows the engine chart exactly as `npm run visualize` generates it', async () => {
    const { readmeChartSection } = await import('../visualizer/export');
    const mmd = readFileSync(new URL('../visualizer/out/engine.mmd', import.meta.url), 'utf8');
    expect(readme, 'README engine chart is stale: run `npm run visualize`').toContain(readmeChartSection(mmd));
  });

  it('holds the two fresh-machine commands', () => {
    expect(readme).toContain('npm ci && npm start');
    expect(readme).toContain('npm ci && npm test');
  });
});

/**
 * The README is the front door (short, the two commands verbatim); docs/configuration.md's
 * config table must list exactly the fields the schema accepts, with the defaults parseConfig
 * applies; docs/charts.md shows the engine chart as generated.
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { ConfigFieldsSchema, parseConfig } from '../../src/services/config';

const readme = readFileSync(new URL('../../README.md', import.meta.url), 'utf8');
const configDoc = readFileSync(new URL('../../docs/configuration.md', import.meta.url), 'utf8');
const chartsDoc = readFileSync(new URL('../../docs/charts.md', import.meta.url), 'utf8');

function section(name: string): string {
  const start = configDoc.indexOf(`<!-- ${name}:start -->`);
  const end = configDoc.indexOf(`<!-- ${name}:end -->`);
  if (start < 0 || end < start) throw new Error(`docs/configuration.md has no ${name} section`);
  return configDoc.slice(start, end);
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
    if (inner?.shape && (key === 'prune' || key === 'circuitBreaker' || key === 'redaction')) out.push(...Object.keys(inner.shape).map((k) => `${key}.${k}`));
    else out.push(key);
  }
  return out.sort();
}

describe('README and the config reference', () => {
  it('documents every config field, and only those', () => {
    expect(
      tableRows()
        .map((r) => r.field)
        .sort(),
    ).toEqual(schemaFields());
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

  it('docs/charts.md shows the engine chart exactly as `npm run visualize` generates it', async () => {
    const { engineChartSection } = await import('../../visualizer/export');
    const mmd = readFileSync(new URL('../../visualizer/out/engine.mmd', import.meta.url), 'utf8');
    expect(chartsDoc, 'docs/charts.md engine chart is stale: run `npm run visualize`').toContain(engineChartSection(mmd));
  });

  it('is a front door: at most 300 lines', () => {
    expect(readme.split('\n').length).toBeLessThanOrEqual(300);
  });

  it('holds the two fresh-machine commands', () => {
    expect(readme).toContain('npm ci && npm start');
    expect(readme).toContain('npm ci && npm test');
  });
});

describe('README, as a new user reads it', () => {
  it('the drop-in snippet defines the tools and the dispatcher it uses (no name left for the reader to guess)', async () => {
    const { codeBlocks } = await import('../helpers/markdown');
    const snippet = codeBlocks(readme).find((b) => b.lang === 'ts' && b.code.includes('withCompaction'));
    expect(snippet).toBeDefined();
    expect(snippet!.code).toMatch(/^const tools: ChatCompletionTool\[\] = \[/m);
    expect(snippet!.code).toMatch(/^async function runTool\(call: ChatCompletionMessageToolCall\): Promise<string> \{/m);
  });

  it('explains each EBADENGINE warning npm ci prints on Node 20: every locked package that needs a newer Node is named', () => {
    const lock = JSON.parse(readFileSync(new URL('../../package-lock.json', import.meta.url), 'utf8')) as {
      packages: Record<string, { engines?: { node?: string }; dev?: boolean }>;
    };
    // Node 20 is excluded by a lower bound of 21 or more ('>=22', '>=22.12.0', '^22 || >=24').
    const newer = Object.entries(lock.packages).filter(([p, v]) => p !== '' && /^\s*(>=\s*|\^)2[1-9]/.test(v.engines?.node ?? ''));
    expect(newer.length).toBeGreaterThan(0);
    expect(readme).toContain(`prints ${newer.length} \`EBADENGINE`);
    for (const [path, v] of newer) {
      expect(v.dev, `${path} is a development dependency`).toBe(true);
      const name = path.replace(/^.*node_modules\//, '').replace(/^@ai-sdk\//, '');
      expect(readme, `README names ${path}`).toContain(name);
    }
  });
});

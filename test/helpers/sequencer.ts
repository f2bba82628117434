/**
 * vitest's order, with SLOW_FILES standing in for the timing cache a fresh clone does not
 * have (see suite-plan.ts).
 */
import { relative, sep } from 'node:path';
import { BaseSequencer, type TestSpecification } from 'vitest/node';
import { SLOW_FILES, slowFirst } from './suite-plan.js';

export class SuiteSequencer extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const sorted = await super.sort(files);
    const root = this.ctx.config.root;
    return slowFirst(sorted, (spec) => {
      const file = relative(root, spec.moduleId).split(sep).join('/');
      const cached = this.ctx.cache.getFileTestResults(`${spec.project.name}:${file}`);
      return cached ? cached.duration / 1000 : SLOW_FILES[file];
    });
  }
}

/** The request check the loop checker uses, shipped in xcompact/testing (src/testing/request-problems.ts). */
export { openAIMessageProblems } from '../../src/testing/request-problems';

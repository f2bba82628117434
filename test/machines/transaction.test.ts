/**
 * Every transition of the transaction chart, by paths generated from the chart, run on the
 * real engine (see suite-transaction.ts).
 */
import { describeGeneratedPaths, useServer } from './describe';
import { runTransactionPath } from './suite-transaction';

const server = useServer();
describeGeneratedPaths('transaction', server, runTransactionPath);

import 'reflect-metadata';
import { steadyAgent } from './support/zero-latency';
import { median } from './support/stats';
(async () => {
  const steady = await steadyAgent({});
  for (let i = 0; i < 300; i++) await steady.agent.handleMessage({ sessionId: 'steady', content: `hello ${i}` });
  const runs: number[] = [];
  for (let r = 0; r < 7; r++) {
    const t = performance.now();
    for (let i = 0; i < 2000; i++) await steady.agent.handleMessage({ sessionId: 'steady', content: `hello ${i}` });
    runs.push(((performance.now() - t) / 2000) * 1000);
  }
  console.log(process.env.HL, 'µs/turn', median(runs).toFixed(1));
  await steady.close(); process.exit(0);
})();

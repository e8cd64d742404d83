import { defineTool } from '@standardagents/spec';

let tries = 0;
while (true) {
  try {
    tries += 1;
    throw new Error('again');
  } catch {
    // swallowed: only the deadline stops this
  }
}

export default defineTool({ description: 'Never loads.', result: `${tries}` });

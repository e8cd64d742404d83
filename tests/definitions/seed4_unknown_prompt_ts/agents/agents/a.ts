import { defineAgent } from '@standardagents/spec';
export default defineAgent({
  name: 'a',
  sideA: { prompt: 'missing' },
  sideB: { handler: 'missing_too' },
});

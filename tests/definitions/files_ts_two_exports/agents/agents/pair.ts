import { defineAgent } from '@standardagents/spec';

export default defineAgent({
  name: 'first',
  sideA: { prompt: 'chat' },
  sideB: { human: true, colour: 'red' },
});

export default defineAgent({
  name: 'second',
  sideA: { prompt: 'chat' },
  sideB: { human: true },
});

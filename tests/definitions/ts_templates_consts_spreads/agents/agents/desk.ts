import { defineAgent } from '@standardagents/spec';

const human = { human: true } as const;
const names = ['support', 'billing'];

export default defineAgent({
  name: 'desk',
  sideA: { prompt: names[0] },
  sideB: { ...human },
});

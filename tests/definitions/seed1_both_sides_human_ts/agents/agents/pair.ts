import { defineAgent } from '@standardagents/spec';

export default defineAgent({
  name: 'pair',
  sideA: { human: true },
  sideB: { human: true },
});

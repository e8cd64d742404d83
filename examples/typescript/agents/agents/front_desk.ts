import { defineAgent } from '@standardagents/spec';

export default defineAgent({
  name: 'front_desk',
  sideA: { handler: 'front_desk' },
  sideB: { human: true },
});

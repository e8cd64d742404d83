import { defineAgent } from '@standardagents/spec';
export default defineAgent({
  name: 'broken',
  sideA: { prompt: 'chat' 
});

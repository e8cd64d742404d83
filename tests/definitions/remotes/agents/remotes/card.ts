import { defineRemoteAgent } from '@standardagents/spec';
export default defineRemoteAgent({
  name: "card",
  url: "{{env.REMOTE_HOST}}/a2a/x/.well-known/agent-card.json",
  description: "A remote agent named by its card URL.",
  timeoutMs: 60000,
});

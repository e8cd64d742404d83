import { defineMcpServer } from '@standardagents/spec';
export default defineMcpServer({
  name: 'remote',
  url: 'https://mcp.example.com/mcp',
  headers: { Authorization: 'Bearer {{env.REMOTE_TOKEN}}' },
});

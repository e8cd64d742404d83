export default defineAgent({
  name: 'a',
  sideA: { prompt: 'missing' },
  sideB: { handler: 'missing_too' },
});

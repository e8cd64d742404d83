export default defineAgent({
  name: 'broken',
  sideA: { prompt: 'chat' 
});

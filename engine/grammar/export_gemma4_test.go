package grammar

// HATools are the tools of TestGemma4ToolCallsGrammar, for the external
// tests.
var HATools = haTools

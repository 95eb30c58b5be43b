module llmchaos/faultproxy

go 1.22

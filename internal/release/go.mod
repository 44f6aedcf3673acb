module github.com/redislock-go/redislock/internal/release

go 1.25.0

require (
	github.com/stretchr/testify v1.12.1
	golang.org/x/mod v0.40.0
)

require go.yaml.in/yaml/v3 v3.0.5 // indirect

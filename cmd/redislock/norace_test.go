//go:build !race

package main_test

const raceBuild = false

module github.com/mixprec/mixprec/tools/gopeers/peer

go 1.26.0

module parataxis/tests/bench/go

go 1.19

module droidmesh.example/runtask

go 1.19

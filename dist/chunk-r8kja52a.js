async function within(promise,ms){let timer,expired=new Promise((resolve)=>{timer=setTimeout(()=>resolve(void 0),ms)});try{return await Promise.race([promise,expired])}finally{clearTimeout(timer)}}
export{within};
